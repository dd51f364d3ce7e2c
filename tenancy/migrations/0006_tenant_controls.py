"""Tenant controls: a tenant's intake paused or not, and its own reprocess rate limit."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenancy', '0005_roles_review'),
    ]

    operations = [
        migrations.CreateModel(
            name='TenantControl',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tenant', models.CharField(max_length=33, unique=True)),
                ('intake_paused', models.BooleanField(default=False)),
                ('paused_at', models.DateTimeField(blank=True, null=True)),
                ('reprocess_limit', models.PositiveIntegerField(blank=True, null=True)),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'permissions': [('cancel_job', 'Can cancel a queued or leased job'), ('run_job_now', 'Can run a delayed job now'), ('pause_intake', "Can pause and resume a tenant's intake"), ('set_reprocess_limit', "Can change a tenant's reprocess rate limit")],
                'indexes': [models.Index(condition=models.Q(('intake_paused', True)), fields=['tenant'], name='tenantcontrol_paused')],
                'constraints': [models.CheckConstraint(condition=models.Q(('intake_paused', False), ('paused_at__isnull', False), _connector='OR'), name='tenantcontrol_paused_has_time'), models.CheckConstraint(condition=models.Q(('reprocess_limit__isnull', True), ('reprocess_limit__gte', 1), _connector='OR'), name='tenantcontrol_limit_positive')],
            },
        ),
    ]
