"""The roles again, now that tenant controls exist (tenancy 0006): both roles view their tenants'
controls; Operators cancel live jobs, run delayed jobs now and pause or resume intake. Changing a
tenant's reprocess limit stays out of every role (superusers, or a user granted it for a recovery).
0007's roles (0004's, the review page's document content and the webhooks') plus those permissions."""

import importlib

from django.db import migrations

from tenancy.roles import ensure_roles

BEFORE = importlib.import_module("tenancy.migrations.0007_roles_webhooks").ROLES
ROLES = {
    "Operators": BEFORE["Operators"] + (
        ("tenancy", "view_tenantcontrol"), ("tenancy", "cancel_job"), ("tenancy", "run_job_now"),
        ("tenancy", "pause_intake"),
    ),
    "Auditors": BEFORE["Auditors"] + (("tenancy", "view_tenantcontrol"),),
}


def forwards(apps, schema_editor):
    ensure_roles(apps, ROLES)


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0006_tenant_controls"),
        ("tenancy", "0007_roles_webhooks"),
    ]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
