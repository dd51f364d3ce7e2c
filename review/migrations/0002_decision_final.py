"""A decision is final in the database itself: UPDATE and DELETE of a review decision raise."""

from django.db import migrations

POSTGRES = """
CREATE OR REPLACE FUNCTION review_decision_final() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'review_reviewdecision is final: %% refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$ LANGUAGE plpgsql;
CREATE TRIGGER review_reviewdecision_final BEFORE UPDATE OR DELETE ON review_reviewdecision
FOR EACH ROW EXECUTE FUNCTION review_decision_final();
CREATE TRIGGER review_reviewdecision_no_truncate BEFORE TRUNCATE ON review_reviewdecision
FOR EACH STATEMENT EXECUTE FUNCTION review_decision_final();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS review_reviewdecision_final ON review_reviewdecision;
DROP TRIGGER IF EXISTS review_reviewdecision_no_truncate ON review_reviewdecision;
DROP FUNCTION IF EXISTS review_decision_final();
"""
SQLITE = [
    "CREATE TRIGGER review_reviewdecision_no_update BEFORE UPDATE ON review_reviewdecision "
    "BEGIN SELECT RAISE(ABORT, 'review_reviewdecision is final: UPDATE refused'); END;",
    "CREATE TRIGGER review_reviewdecision_no_delete BEFORE DELETE ON review_reviewdecision "
    "BEGIN SELECT RAISE(ABORT, 'review_reviewdecision is final: DELETE refused'); END;",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS review_reviewdecision_no_update;",
    "DROP TRIGGER IF EXISTS review_reviewdecision_no_delete;",
]


def forwards(apps, schema_editor):
    for statement in [POSTGRES] if schema_editor.connection.vendor == "postgresql" else SQLITE:
        schema_editor.execute(statement)


def backwards(apps, schema_editor):
    for statement in [POSTGRES_DROP] if schema_editor.connection.vendor == "postgresql" else SQLITE_DROP:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("review", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
