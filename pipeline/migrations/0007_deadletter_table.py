"""The dead letters' table takes the pipeline's name, now that the model lives here (0006)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("pipeline", "0006_deadletter_presence_attempts"),
        ("dlq", "0005_deadletter_moved_to_pipeline"),
    ]

    operations = [migrations.AlterModelTable(name="deadletter", table=None)]
