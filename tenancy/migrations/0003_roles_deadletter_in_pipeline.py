"""The roles again, now that dead letters are pipeline rows (pipeline 0006) and reprocessing is a
permission of the audit (dlq 0005): 0002's roles with the dead letters' view permission moved."""

import importlib

from django.db import migrations

from tenancy.roles import ensure_roles

BEFORE = importlib.import_module("tenancy.migrations.0002_roles").ROLES
MOVED = {("dlq", "view_deadletter"): ("pipeline", "view_deadletter")}
ROLES = {name: tuple(MOVED.get(perm, perm) for perm in perms) for name, perms in BEFORE.items()}


def forwards(apps, schema_editor):
    ensure_roles(apps, ROLES)


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0002_roles"),
        ("pipeline", "0007_deadletter_table"),
        ("dlq", "0005_deadletter_moved_to_pipeline"),
    ]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
