"""Record every lease in pipeline_attempt from the database itself.

A trigger fires whenever a job's fence grows: it closes the attempt whose lease expired (a takeover)
and opens the new one. The claim stays one statement, and no writer can lease without a record.
"""

from django.db import migrations

POSTGRES = """
CREATE OR REPLACE FUNCTION pipeline_record_attempt() RETURNS trigger AS $$
BEGIN
    IF OLD.status = 'leased' THEN
        UPDATE pipeline_attempt SET ended_at = NEW.leased_at, error_code = 'lease_expired'
        WHERE job_id = OLD.id AND fence = OLD.fence AND ended_at IS NULL;
    END IF;
    INSERT INTO pipeline_attempt (job_id, fence, attempt, worker, leased_at, error_code)
    VALUES (NEW.id, NEW.fence, NEW.attempt, NEW.lease_owner, NEW.leased_at, '');
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER pipeline_job_leased AFTER UPDATE OF fence ON pipeline_job
FOR EACH ROW WHEN (NEW.fence > OLD.fence) EXECUTE FUNCTION pipeline_record_attempt();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS pipeline_job_leased ON pipeline_job;
DROP FUNCTION IF EXISTS pipeline_record_attempt();
"""
SQLITE = [
    """
CREATE TRIGGER pipeline_job_leased AFTER UPDATE OF fence ON pipeline_job
FOR EACH ROW WHEN NEW.fence > OLD.fence
BEGIN
    UPDATE pipeline_attempt SET ended_at = NEW.leased_at, error_code = 'lease_expired'
    WHERE OLD.status = 'leased' AND job_id = OLD.id AND fence = OLD.fence AND ended_at IS NULL;
    INSERT INTO pipeline_attempt (job_id, fence, attempt, worker, leased_at, error_code)
    VALUES (NEW.id, NEW.fence, NEW.attempt, NEW.lease_owner, NEW.leased_at, '');
END;
"""
]
SQLITE_DROP = ["DROP TRIGGER IF EXISTS pipeline_job_leased;"]


def forwards(apps, schema_editor):
    statements = [POSTGRES] if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in statements:
        schema_editor.execute(statement)


def backwards(apps, schema_editor):
    statements = [POSTGRES_DROP] if schema_editor.connection.vendor == "postgresql" else SQLITE_DROP
    for statement in statements:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
