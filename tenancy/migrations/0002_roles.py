"""Create the two roles as groups with their permissions (tenancy.roles): Operators and Auditors."""

from django.db import migrations

from tenancy.roles import ROLES, ensure_roles


def forwards(apps, schema_editor):
    ensure_roles(apps)


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
