"""Webhook endpoints (secret encrypted at rest) and their per-event deliveries."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('pipeline', '0013_outbox_backoff_parking'),
    ]

    operations = [
        migrations.CreateModel(
            name='WebhookEndpoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tenant', models.CharField(max_length=33)),
                ('url', models.CharField(max_length=2000)),
                ('topics', models.JSONField(default=list)),
                ('secret_encrypted', models.TextField()),
                ('secret_hint', models.CharField(default='', max_length=12)),
                ('active', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField()),
                ('created_by', models.CharField(blank=True, default='', max_length=150)),
                ('secret_set_at', models.DateTimeField()),
            ],
            options={
                'verbose_name': 'webhook endpoint',
                'permissions': [('configure_webhookendpoint', 'Can add and change webhook endpoints and give new secrets')],
                'indexes': [models.Index(fields=['tenant', 'active'], name='webhook_tenant_active')],
            },
        ),
        migrations.CreateModel(
            name='WebhookDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('last_status', models.PositiveSmallIntegerField(blank=True, null=True)),
                ('last_failure', models.CharField(blank=True, default='', max_length=32)),
                ('last_attempt_at', models.DateTimeField()),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('event', models.ForeignKey(db_column='event_id', on_delete=django.db.models.deletion.CASCADE, related_name='webhook_deliveries', to='pipeline.outboxevent', to_field='event_id')),
                ('endpoint', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='webhooks.webhookendpoint')),
            ],
            options={
                'verbose_name_plural': 'webhook deliveries',
                'indexes': [models.Index(condition=models.Q(('delivered_at__isnull', True)), fields=['endpoint', 'id'], name='webhook_delivery_undelivered')],
                'constraints': [models.UniqueConstraint(fields=('event', 'endpoint'), name='webhook_one_delivery_per_endpoint')],
            },
        ),
    ]
