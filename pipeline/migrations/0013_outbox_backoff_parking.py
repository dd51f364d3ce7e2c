"""Outbox backoff and parking: a failed publication is counted (failures, its kind and the last HTTP
status), waits out a backoff (next_attempt_at), and parks the event at the last allowed failure
(parked_at); the relay's claim reads rows never failed (index outbox_fresh) and rows whose backoff
ended (outbox_backoff), never a backlog still backing off. Operators may redeliver a parked event."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pipeline', '0012_merged_reason_codes'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='outboxevent',
            options={'permissions': [('redeliver_outboxevent', 'Can redeliver a parked outbox event')]},
        ),
        migrations.AddField(
            model_name='outboxevent',
            name='failures',
            field=models.PositiveIntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name='outboxevent',
            name='last_failure',
            field=models.CharField(blank=True, db_default='', max_length=32),
        ),
        migrations.AddField(
            model_name='outboxevent',
            name='last_status',
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='outboxevent',
            name='next_attempt_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='outboxevent',
            name='parked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='outboxevent',
            index=models.Index(condition=models.Q(('next_attempt_at__isnull', True), ('parked_at__isnull', True), ('published_at__isnull', True)), fields=['id'], name='outbox_fresh'),
        ),
        migrations.AddIndex(
            model_name='outboxevent',
            index=models.Index(condition=models.Q(('next_attempt_at__isnull', False), ('parked_at__isnull', True), ('published_at__isnull', True)), fields=['next_attempt_at'], name='outbox_backoff'),
        ),
    ]
