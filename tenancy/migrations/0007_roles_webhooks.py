"""The roles again, now that webhooks exist (webhooks 0001, pipeline 0013): both roles view their
tenants' webhook endpoints; Operators configure them (add, change, new secret) and redeliver parked
outbox events.
0005's roles plus those permissions."""

import importlib

from django.db import migrations

from tenancy.roles import ensure_roles

BEFORE = importlib.import_module("tenancy.migrations.0005_roles_review").ROLES
ROLES = {
    "Operators": BEFORE["Operators"] + (
        ("webhooks", "view_webhookendpoint"), ("webhooks", "configure_webhookendpoint"),
        ("pipeline", "redeliver_outboxevent"),
    ),
    "Auditors": BEFORE["Auditors"] + (("webhooks", "view_webhookendpoint"),),
}


def forwards(apps, schema_editor):
    ensure_roles(apps, ROLES)


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0006_tenant_controls"),
        ("pipeline", "0013_outbox_backoff_parking"),
        ("webhooks", "0001_initial"),
    ]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
