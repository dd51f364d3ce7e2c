"""The roles again, now that API keys exist (ingest 0001): both roles view their tenants' keys, and
Operators revoke them. 0003's roles plus those permissions."""

import importlib

from django.db import migrations

from tenancy.roles import ensure_roles

BEFORE = importlib.import_module("tenancy.migrations.0003_roles_deadletter_in_pipeline").ROLES
ROLES = {
    "Operators": BEFORE["Operators"] + (("ingest", "view_apikey"), ("ingest", "revoke_apikey")),
    "Auditors": BEFORE["Auditors"] + (("ingest", "view_apikey"),),
}


def forwards(apps, schema_editor):
    ensure_roles(apps, ROLES)


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0003_roles_deadletter_in_pipeline"),
        ("ingest", "0001_initial"),
    ]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
