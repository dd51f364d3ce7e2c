"""Close a job's open attempt from the database itself when the job leaves ``leased`` for good.

The commit path stays lean (no extra statement): a trigger stamps the attempt's end with the job's
``finished_at``. A lease that had already expired when the job was finished (cancelled at claim past
its deadline, dead-lettered by the rescuer) is recorded as ``lease_expired``: the worker died.
"""

from django.db import migrations

CODE = """CASE WHEN NEW.status = 'succeeded' THEN ''
              WHEN OLD.lease_until < NEW.finished_at THEN 'lease_expired'
              ELSE NEW.last_error_code END"""
POSTGRES = f"""
CREATE OR REPLACE FUNCTION pipeline_close_attempt() RETURNS trigger AS $$
BEGIN
    UPDATE pipeline_attempt SET ended_at = NEW.finished_at, error_code = {CODE}
    WHERE job_id = NEW.id AND fence = OLD.fence AND ended_at IS NULL;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER pipeline_job_finished AFTER UPDATE OF status ON pipeline_job
FOR EACH ROW WHEN (OLD.status = 'leased' AND NEW.status IN ('succeeded', 'dead_lettered', 'cancelled'))
EXECUTE FUNCTION pipeline_close_attempt();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS pipeline_job_finished ON pipeline_job;
DROP FUNCTION IF EXISTS pipeline_close_attempt();
"""
SQLITE = f"""
CREATE TRIGGER pipeline_job_finished AFTER UPDATE OF status ON pipeline_job
FOR EACH ROW WHEN OLD.status = 'leased' AND NEW.status IN ('succeeded', 'dead_lettered', 'cancelled')
BEGIN
    UPDATE pipeline_attempt SET ended_at = NEW.finished_at, error_code = {CODE}
    WHERE job_id = NEW.id AND fence = OLD.fence AND ended_at IS NULL;
END;
"""
SQLITE_DROP = "DROP TRIGGER IF EXISTS pipeline_job_finished;"


def forwards(apps, schema_editor):
    schema_editor.execute(POSTGRES if schema_editor.connection.vendor == "postgresql" else SQLITE)


def backwards(apps, schema_editor):
    schema_editor.execute(POSTGRES_DROP if schema_editor.connection.vendor == "postgresql" else SQLITE_DROP)


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0004_admin_list_indexes")]
    operations = [migrations.RunPython(forwards, backwards)]
