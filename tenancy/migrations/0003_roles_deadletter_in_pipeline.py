"""The roles again, now that dead letters are pipeline rows and reprocessing is a permission of the audit."""

from django.db import migrations

from tenancy.roles import ensure_roles

VIEW = (
    ("pipeline", "view_job"), ("pipeline", "view_result"), ("pipeline", "view_review"),
    ("pipeline", "view_outboxevent"), ("pipeline", "view_deadletter"), ("dlq", "view_auditentry"),
    ("dlq", "view_reprocessrefusal"),
)
ROLES = {  # as they were when this migration was written
    "Operators": VIEW + (("dlq", "reprocess_deadletter"), ("pipeline", "decide_review")),
    "Auditors": VIEW,
}


def forwards(apps, schema_editor):
    ensure_roles(apps, ROLES)


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0002_roles"),
        ("pipeline", "0007_deadletter_table"),
        ("dlq", "0005_deadletter_moved_to_pipeline"),
    ]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
