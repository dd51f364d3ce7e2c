"""The commit of one job and the claim of the next as one server-side function: one transaction and one
round trip per job behind a backlog.

A drain working through a backlog committed a job (``relayops_commit_result``) and then claimed the
next (``relayops_claim``): two transactions, two round trips. ``relayops_commit_and_claim`` calls the
two in that order, in one transaction, unchanged: every check of each is kept, and its columns are the
commit's (``outcome``, ``result_id``, ``event_id``), the server time the claim took (``claim_seconds``:
the caller keeps the commit's own time apart from it) and the claim's row (null columns when nothing was
claimable). A commit that is not this lease's (``stale``) claims nothing; a result conflict (SQLSTATE
RX409) rolls the whole call back, the claim with it. A job claimed this way is leased from the moment
the call commits, as by a claim of its own: a worker that dies before running it leaves a lease to
expire and be taken over.

Changing this function means a new migration that replaces it (``CREATE OR REPLACE``).
"""

from django.db import migrations

POSTGRES = """
CREATE OR REPLACE FUNCTION relayops_commit_and_claim(
    p_job_id bigint, p_fence bigint, p_from varchar[], p_now timestamptz, p_tenant varchar, p_key varchar,
    p_payload_hash varchar, p_data jsonb, p_topic varchar, p_event_id uuid, p_event_payload jsonb, p_notify boolean,
    p_report boolean, p_extractor varchar, p_model_name varchar, p_prompt_hash varchar, p_input_tokens integer,
    p_output_tokens integer, p_inference_seconds double precision, p_cost numeric,
    p_claim_now timestamptz, p_worker varchar, p_lease_until timestamptz)
RETURNS TABLE (outcome text, result_id bigint, event_id uuid, claim_seconds double precision,
               id bigint, status varchar, fence bigint, attempt integer, max_attempts integer, tenant varchar,
               document_id varchar, operation_version integer, idempotency_key varchar, payload jsonb,
               payload_hash varchar, deadline_at timestamptz, lease_until timestamptz, lease_owner varchar,
               leased_at timestamptz, due_at timestamptz, more_waiting boolean, snapshot text)
LANGUAGE plpgsql AS $$
DECLARE
    committed record;
    v_started timestamptz;
BEGIN
    SELECT * INTO committed FROM relayops_commit_result(
        p_job_id, p_fence, p_from, p_now, p_tenant, p_key, p_payload_hash, p_data, p_topic, p_event_id,
        p_event_payload, p_notify, p_report, p_extractor, p_model_name, p_prompt_hash, p_input_tokens,
        p_output_tokens, p_inference_seconds, p_cost);
    outcome := committed.outcome;
    result_id := committed.result_id;
    event_id := committed.event_id;
    IF committed.outcome = 'stale' THEN  -- not this lease's: nothing was written, nothing is claimed
        RETURN NEXT;
        RETURN;
    END IF;
    v_started := clock_timestamp();
    -- The claim's function runs to its end before this row is made: clock_timestamp() reads after it.
    RETURN QUERY SELECT committed.outcome, committed.result_id, committed.event_id,
        extract(epoch FROM clock_timestamp() - v_started)::double precision, claimed.*
    FROM relayops_claim(p_claim_now, p_worker, p_lease_until) AS claimed;
    IF NOT FOUND THEN  -- nothing was claimable: the commit's row alone
        claim_seconds := extract(epoch FROM clock_timestamp() - v_started);
        RETURN NEXT;
    END IF;
END $$;
"""
POSTGRES_DROP = """
DROP FUNCTION IF EXISTS relayops_commit_and_claim(
    bigint, bigint, varchar[], timestamptz, varchar, varchar, varchar, jsonb, varchar, uuid, jsonb, boolean, boolean,
    varchar, varchar, varchar, integer, integer, double precision, numeric, timestamptz, varchar, timestamptz);
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_DROP)


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0018_claim_function")]
    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
