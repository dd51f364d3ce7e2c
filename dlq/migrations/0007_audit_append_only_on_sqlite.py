"""0006 remade the audit table on SQLite, which dropped its triggers there: put them back (PostgreSQL
keeps them through ALTER TABLE)."""

from django.db import migrations

from relayops.append_only import refuse_changes


class Migration(migrations.Migration):
    dependencies = [("dlq", "0006_audit_any_decision")]
    operations = [
        refuse_changes("dlq_auditentry", "dlq_audit_append_only", "dlq_auditentry_append_only", "append-only",
                       sqlite_only=True),
    ]
