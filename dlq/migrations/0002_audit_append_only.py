"""The audit table is append-only in the database itself: UPDATE and DELETE raise."""

from django.db import migrations

from relayops.append_only import refuse_changes


class Migration(migrations.Migration):
    dependencies = [("dlq", "0001_initial")]
    operations = [
        refuse_changes("dlq_auditentry", "dlq_audit_append_only", "dlq_auditentry_append_only", "append-only"),
    ]
