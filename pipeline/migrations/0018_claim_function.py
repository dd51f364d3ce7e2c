"""The claim as one server-side function: PostgreSQL plans its statements once per connection.

The claim was one statement (a data-modifying CTE over the job and attempt tables, with a second look
at the claimable jobs), sent with its values as literals: PostgreSQL planned all of it on every claim,
0.4 ms, more than it took to run it. ``relayops_claim`` does the same in short statements whose
plans PL/pgSQL keeps for the connection's life (``CONN_MAX_AGE``): a plan is remade when it is
invalidated (an ANALYZE, a schema change), and PostgreSQL's plan cache keeps a generic plan only where
it costs no more than the plans made for the actual values. Each statement reads through an index
however the tables grew since its plan was made (a test holds it): the claimable jobs' partial index in
line order, the primary key, an attempt's (job, fence) or the open attempts' partial index.

What it does, as the statement did: the oldest claimable job (``pipeline.sql.CLAIMABLE``, the same text:
a test compares them) is locked, skipping rows other claimers hold; past its deadline it is cancelled,
otherwise leased with its fence one higher, an attempt counted for a fresh lease and a lease expiry
for a taken-over one; the attempt of a lease taken over is closed (``lease_expired``) and the new
lease's attempt opened, with ``due_at`` from the row as it was. It returns the job's lease columns,
``due_at``, ``more_waiting`` (another job is claimable now, held by another claimer or not: it errs
towards one more look) and ``snapshot``, taken before the claim reads (what it says the claim saw, the
claim saw). No row: nothing was claimable.

Changing this function means a new migration that replaces it (``CREATE OR REPLACE``).
"""

from django.db import migrations

POSTGRES = """
CREATE OR REPLACE FUNCTION relayops_claim(p_now timestamptz, p_worker varchar, p_lease_until timestamptz)
RETURNS TABLE (id bigint, status varchar, fence bigint, attempt integer, max_attempts integer, tenant varchar,
               document_id varchar, operation_version integer, idempotency_key varchar, payload jsonb,
               payload_hash varchar, deadline_at timestamptz, lease_until timestamptz, lease_owner varchar,
               leased_at timestamptz, due_at timestamptz, more_waiting boolean, snapshot text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_snapshot text := pg_current_snapshot()::text;
    prior pipeline_job%ROWTYPE;
    claimed pipeline_job%ROWTYPE;
    v_due timestamptz;
    v_more boolean;
BEGIN
    SELECT * INTO prior FROM pipeline_job
    WHERE status IN ('queued', 'leased') AND visible_at <= p_now
      AND CASE WHEN status = 'leased'
               THEN lease_until <= p_now AND lease_expiries < max_lease_expiries
               ELSE attempt < max_attempts END
      AND tenant NOT IN (SELECT tenant FROM tenancy_tenantcontrol WHERE intake_paused)
    ORDER BY visible_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_due := CASE WHEN prior.status = 'leased' THEN prior.lease_until ELSE prior.visible_at END;

    IF prior.deadline_at <= p_now THEN
        UPDATE pipeline_job SET status = 'cancelled', lease_owner = '', lease_until = NULL, finished_at = p_now,
            last_error_code = 'deadline_exceeded'
        WHERE id = prior.id
        RETURNING * INTO claimed;
    ELSE
        UPDATE pipeline_job SET status = 'leased', fence = fence + 1,
            attempt = CASE WHEN status = 'leased' THEN attempt ELSE attempt + 1 END,
            lease_expiries = CASE WHEN status = 'leased' THEN lease_expiries + 1 ELSE lease_expiries END,
            lease_owner = p_worker, lease_until = p_lease_until, leased_at = p_now, finished_at = NULL
        WHERE id = prior.id
        RETURNING * INTO claimed;
    END IF;
    IF prior.status = 'leased' THEN
        UPDATE pipeline_attempt SET ended_at = p_now, error_code = 'lease_expired'
        WHERE job_id = prior.id AND fence = prior.fence AND ended_at IS NULL;
    END IF;
    IF claimed.status = 'leased' THEN
        INSERT INTO pipeline_attempt (job_id, tenant, fence, attempt, worker, due_at, leased_at, error_code)
        VALUES (claimed.id, claimed.tenant, claimed.fence, claimed.attempt, claimed.lease_owner, v_due,
                claimed.leased_at, '');
    END IF;

    -- Another job claimable? In line order, as the claim reads (a scan from the table's start would
    -- step over every finished row before the first claimable one).
    PERFORM 1 FROM pipeline_job
    WHERE status IN ('queued', 'leased') AND visible_at <= p_now
      AND CASE WHEN status = 'leased'
               THEN lease_until <= p_now AND lease_expiries < max_lease_expiries
               ELSE attempt < max_attempts END
      AND tenant NOT IN (SELECT tenant FROM tenancy_tenantcontrol WHERE intake_paused)
    ORDER BY visible_at, id
    LIMIT 1;
    v_more := FOUND;

    RETURN QUERY SELECT claimed.id, claimed.status, claimed.fence, claimed.attempt, claimed.max_attempts,
        claimed.tenant, claimed.document_id, claimed.operation_version, claimed.idempotency_key,
        claimed.payload, claimed.payload_hash, claimed.deadline_at, claimed.lease_until, claimed.lease_owner,
        claimed.leased_at, v_due, v_more, v_snapshot;
END $$;
"""
POSTGRES_DROP = "DROP FUNCTION IF EXISTS relayops_claim(timestamptz, varchar, timestamptz);"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES, params=None)  # the text holds %ROWTYPE: no placeholders


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_DROP)


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0017_leaner_indexes")]
    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
