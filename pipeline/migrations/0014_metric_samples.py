"""The measures kept apart: an attempt's tenant, when it became due (queue wait = leased_at - due_at) and its
commit time; the indexes that serve the dashboard's windows; the running totals of the measures (what
/metrics exposes); and the sampled measures drawn over time (throughput, outbox lag, dead letters by
reason, reprocess refusals, drains alive per node)."""

from django.db import migrations, models

# Earlier attempts learn their job's tenant (one statement that both databases run); their due_at
# stays unknown (NULL): queue wait is measured from this version on.
BACKFILL_TENANT = """
UPDATE pipeline_attempt SET tenant = (SELECT tenant FROM pipeline_job WHERE pipeline_job.id = pipeline_attempt.job_id)
"""


class Migration(migrations.Migration):

    dependencies = [
        ('pipeline', '0013_outbox_backoff_parking'),
    ]

    operations = [
        migrations.CreateModel(
            name='MeasureTotal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('measure', models.CharField(max_length=32)),
                ('tenant', models.CharField(max_length=33)),
                ('count', models.BigIntegerField(default=0)),
                ('total', models.FloatField(default=0.0)),
                ('buckets', models.JSONField(default=list)),
            ],
        ),
        migrations.CreateModel(
            name='MetricSample',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('sampled_at', models.DateTimeField()),
                ('metric', models.CharField(choices=[('finished_per_minute', 'Finished Per Minute'), ('dead_letters', 'Dead Letters'), ('outbox_lag_seconds', 'Outbox Lag Seconds'), ('reprocess_refusals', 'Reprocess Refusals'), ('drains_alive', 'Drains Alive')], max_length=32)),
                ('tenant', models.CharField(blank=True, default='', max_length=33)),
                ('label', models.CharField(blank=True, default='', max_length=100)),
                ('value', models.FloatField()),
            ],
        ),
        migrations.AddField(
            model_name='attempt',
            name='commit_seconds',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='attempt',
            name='due_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='attempt',
            name='tenant',
            field=models.CharField(db_default='', max_length=33),
        ),
        migrations.AddIndex(
            model_name='attempt',
            index=models.Index(fields=['tenant', 'leased_at'], include=('due_at', 'inference_seconds', 'commit_seconds'), name='attempt_tenant_leased'),
        ),
        migrations.AddIndex(
            model_name='attempt',
            index=models.Index(fields=['leased_at'], include=('tenant', 'due_at', 'inference_seconds', 'commit_seconds'), name='attempt_leased'),
        ),
        migrations.AddIndex(
            model_name='attempt',
            index=models.Index(condition=models.Q(('ended_at__isnull', False)), fields=['ended_at'], name='attempt_ended'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('finished_at__isnull', False)), fields=['finished_at'], name='job_finished_at'),
        ),
        migrations.AddIndex(
            model_name='review',
            index=models.Index(condition=models.Q(('decided_at__isnull', False)), fields=['tenant', 'decided_at'], name='review_tenant_decided'),
        ),
        migrations.AddIndex(
            model_name='review',
            index=models.Index(condition=models.Q(('decided_at__isnull', False)), fields=['decided_at'], name='review_decided'),
        ),
        migrations.AddConstraint(
            model_name='measuretotal',
            constraint=models.UniqueConstraint(fields=('measure', 'tenant'), name='measuretotal_measure_tenant'),
        ),
        migrations.AddIndex(
            model_name='metricsample',
            index=models.Index(fields=['metric', 'sampled_at'], name='metricsample_metric_at'),
        ),
        migrations.AddIndex(
            model_name='metricsample',
            index=models.Index(fields=['tenant', 'metric', 'sampled_at'], name='metricsample_tenant_at'),
        ),
        migrations.AddIndex(
            model_name='metricsample',
            index=models.Index(fields=['sampled_at'], name='metricsample_at'),
        ),
        migrations.RunSQL(BACKFILL_TENANT, migrations.RunSQL.noop),
    ]
