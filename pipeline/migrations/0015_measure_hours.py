"""The hourly histograms of the measures the dashboard's wide windows read their percentiles from
(MeasureHour), the twelve-minute slots of the metric samples their series read (MetricSlot) and the
finished jobs' counts /metrics reads (JobTotal), all folded by the sweeper; the index of the attempts
not ended yet (not folded); the metric samples' indexes carrying their values (a window of samples is
read from the index alone)."""


from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pipeline', '0014_metric_samples'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobTotal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tenant', models.CharField(max_length=33)),
                ('status', models.CharField(max_length=16)),
                ('count', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='MeasureHour',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('measure', models.CharField(max_length=32)),
                ('tenant', models.CharField(max_length=33)),
                ('hour', models.DateTimeField()),
                ('counts', models.JSONField(default=dict)),
            ],
        ),
        migrations.CreateModel(
            name='MetricSlot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('metric', models.CharField(choices=[('finished_per_minute', 'Finished Per Minute'), ('dead_letters', 'Dead Letters'), ('outbox_lag_seconds', 'Outbox Lag Seconds'), ('reprocess_refusals', 'Reprocess Refusals'), ('drains_alive', 'Drains Alive')], max_length=32)),
                ('tenant', models.CharField(blank=True, default='', max_length=33)),
                ('label', models.CharField(blank=True, default='', max_length=100)),
                ('slot', models.DateTimeField()),
                ('total', models.FloatField()),
                ('high', models.FloatField()),
                ('low', models.FloatField()),
                ('samples', models.PositiveIntegerField()),
            ],
        ),
        migrations.RemoveIndex(
            model_name='metricsample',
            name='metricsample_metric_at',
        ),
        migrations.RemoveIndex(
            model_name='metricsample',
            name='metricsample_tenant_at',
        ),
        migrations.AddIndex(
            model_name='attempt',
            index=models.Index(condition=models.Q(('ended_at__isnull', True)), fields=['leased_at'], name='attempt_open'),
        ),
        migrations.AddIndex(
            model_name='metricsample',
            index=models.Index(fields=['metric', 'sampled_at'], include=('tenant', 'label', 'value'), name='metricsample_metric_at_v'),
        ),
        migrations.AddIndex(
            model_name='metricsample',
            index=models.Index(fields=['tenant', 'metric', 'sampled_at'], include=('label', 'value'), name='metricsample_tenant_at_v'),
        ),
        migrations.AddConstraint(
            model_name='jobtotal',
            constraint=models.UniqueConstraint(fields=('tenant', 'status'), name='jobtotal_tenant_status'),
        ),
        migrations.AddIndex(
            model_name='measurehour',
            index=models.Index(fields=['hour'], name='measurehour_hour'),
        ),
        migrations.AddConstraint(
            model_name='measurehour',
            constraint=models.UniqueConstraint(fields=('measure', 'tenant', 'hour'), name='measurehour_key'),
        ),
        migrations.AddIndex(
            model_name='metricslot',
            index=models.Index(fields=['metric', 'slot'], include=('tenant', 'label', 'total', 'high', 'low'), name='metricslot_metric_slot'),
        ),
        migrations.AddConstraint(
            model_name='metricslot',
            constraint=models.UniqueConstraint(fields=('metric', 'tenant', 'label', 'slot'), name='metricslot_key'),
        ),
    ]
