"""The audit table is append-only in the database itself: UPDATE and DELETE raise."""

from django.db import migrations

POSTGRES = """
CREATE OR REPLACE FUNCTION dlq_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'dlq_auditentry is append-only: %% refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$ LANGUAGE plpgsql;
CREATE TRIGGER dlq_auditentry_append_only BEFORE UPDATE OR DELETE ON dlq_auditentry
FOR EACH ROW EXECUTE FUNCTION dlq_audit_append_only();
CREATE TRIGGER dlq_auditentry_no_truncate BEFORE TRUNCATE ON dlq_auditentry
FOR EACH STATEMENT EXECUTE FUNCTION dlq_audit_append_only();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS dlq_auditentry_append_only ON dlq_auditentry;
DROP TRIGGER IF EXISTS dlq_auditentry_no_truncate ON dlq_auditentry;
DROP FUNCTION IF EXISTS dlq_audit_append_only();
"""
SQLITE = [
    "CREATE TRIGGER dlq_auditentry_no_update BEFORE UPDATE ON dlq_auditentry "
    "BEGIN SELECT RAISE(ABORT, 'dlq_auditentry is append-only: UPDATE refused'); END;",
    "CREATE TRIGGER dlq_auditentry_no_delete BEFORE DELETE ON dlq_auditentry "
    "BEGIN SELECT RAISE(ABORT, 'dlq_auditentry is append-only: DELETE refused'); END;",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS dlq_auditentry_no_update;",
    "DROP TRIGGER IF EXISTS dlq_auditentry_no_delete;",
]


def forwards(apps, schema_editor):
    for statement in [POSTGRES] if schema_editor.connection.vendor == "postgresql" else SQLITE:
        schema_editor.execute(statement)


def backwards(apps, schema_editor):
    for statement in [POSTGRES_DROP] if schema_editor.connection.vendor == "postgresql" else SQLITE_DROP:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("dlq", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
