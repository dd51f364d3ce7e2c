"""The hourly histograms of the measures the dashboard's wide windows read their percentiles from
(MeasureHour, folded by the sweeper), and the index of the attempts not ended yet (not folded)."""


from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pipeline', '0014_metric_samples'),
    ]

    operations = [
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
        migrations.AddIndex(
            model_name='attempt',
            index=models.Index(condition=models.Q(('ended_at__isnull', True)), fields=['leased_at'], name='attempt_open'),
        ),
        migrations.AddIndex(
            model_name='measurehour',
            index=models.Index(fields=['hour'], name='measurehour_hour'),
        ),
        migrations.AddConstraint(
            model_name='measurehour',
            constraint=models.UniqueConstraint(fields=('measure', 'tenant', 'hour'), name='measurehour_key'),
        ),
    ]
