"""Create the two roles as groups with their permissions (tenancy.roles): Operators and Auditors."""

from django.db import migrations

from tenancy.roles import ensure_roles

VIEW = (
    ("pipeline", "view_job"), ("pipeline", "view_result"), ("pipeline", "view_review"),
    ("pipeline", "view_outboxevent"), ("dlq", "view_deadletter"), ("dlq", "view_auditentry"),
    ("dlq", "view_reprocessrefusal"),
)
ROLES = {  # as they were when this migration was written
    "Operators": VIEW + (("dlq", "reprocess_deadletter"), ("pipeline", "decide_review")),
    "Auditors": VIEW,
}


def forwards(apps, schema_editor):
    ensure_roles(apps, ROLES)


def backwards(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("pipeline", "0001_initial"),
        ("dlq", "0003_reprocessrefusal"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
