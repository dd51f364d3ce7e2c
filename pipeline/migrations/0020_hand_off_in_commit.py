"""The commit hands its event to the review consumer in its own transaction when no other publisher
wants it: a job's result, event, review and the event's publication commit together, in one call.

Until now every committed event waited in the outbox for a relay pass: a claim (with the review
consumer's work on the batch) and a mark, two more statements and two more row versions per event, and
for a job meeting an idle worker a relay pass of its own. An event only the built-in review consumer
wants needs none of that: the consumer's work (remember the event id, create the pending review) is a
write to the same database, so it can join the commit's transaction. ``relayops_commit_result`` takes
two more arguments: ``p_hand_off`` (the caller says whether the event may be handed off here: it is the
review consumer's topic and no other configured publisher wants it, as the caller's statement reads it)
and ``p_consumer`` (the consumer's name, for its consumed-event row). When ``p_hand_off`` holds, the
review is inserted first (unless its key or event id has one already: then nothing is handed off and
the event is left to the relay, as before); the event is then inserted already published (one publish
attempt, no doorbell) and its id remembered as consumed, and ``handed_off`` says so. Otherwise the
function does what it did. ``relayops_commit_and_claim`` passes the two arguments on and returns
``handed_off`` with the commit's columns.

Every guarantee holds: the fence, the hash check on a duplicate result (nothing is handed off when the
commit dedupes or is stale: its transaction wrote no event), exactly one review per event (the review's
unique event id and key, and the consumed-event row the relay's consumer checks), and all of it or none
of it commits.

The functions of 0016 and 0019 stay beside these (other argument lists, so other functions): workers of the
release before keep calling them during a rolling deploy. Changing these functions means a new migration
that replaces them.
"""

from django.db import migrations

COMMIT_RESULT = """
CREATE OR REPLACE FUNCTION relayops_commit_result(
    p_job_id bigint, p_fence bigint, p_from varchar[], p_now timestamptz, p_tenant varchar, p_key varchar, p_payload_hash varchar,
    p_data jsonb, p_topic varchar, p_event_id uuid, p_event_payload jsonb, p_notify boolean,
    p_report boolean, p_extractor varchar, p_model_name varchar, p_prompt_hash varchar, p_input_tokens integer,
    p_output_tokens integer, p_inference_seconds double precision, p_cost numeric,
    p_hand_off boolean, p_consumer varchar,
    OUT outcome text, OUT result_id bigint, OUT event_id uuid, OUT handed_off boolean
) LANGUAGE plpgsql AS $$
DECLARE
    existing_hash varchar;
BEGIN
    handed_off := false;
    UPDATE pipeline_job SET status = 'succeeded', finished_at = p_now, lease_until = NULL
    WHERE id = p_job_id AND fence = p_fence AND status = ANY (p_from) AND status = 'leased';
    IF NOT FOUND THEN
        outcome := 'stale';
        RETURN;
    END IF;
    UPDATE pipeline_attempt SET ended_at = p_now, error_code = '', failed_rule = '',
        extractor = CASE WHEN p_report THEN p_extractor ELSE extractor END,
        model_name = CASE WHEN p_report THEN p_model_name ELSE model_name END,
        prompt_hash = CASE WHEN p_report THEN p_prompt_hash ELSE prompt_hash END,
        input_tokens = CASE WHEN p_report THEN p_input_tokens ELSE input_tokens END,
        output_tokens = CASE WHEN p_report THEN p_output_tokens ELSE output_tokens END,
        inference_seconds = CASE WHEN p_report THEN p_inference_seconds ELSE inference_seconds END,
        cost = CASE WHEN p_report THEN p_cost ELSE cost END
    WHERE job_id = p_job_id AND fence = p_fence AND ended_at IS NULL;

    INSERT INTO pipeline_result (job_id, tenant, idempotency_key, payload_hash, data, fence, created_at)
    VALUES (p_job_id, p_tenant, p_key, p_payload_hash, p_data, p_fence, p_now)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id INTO result_id;
    IF result_id IS NULL THEN  -- the key has a result: the same input dedupes, another is a conflict
        SELECT r.id, r.payload_hash INTO result_id, existing_hash FROM pipeline_result r
        WHERE r.idempotency_key = p_key;
        IF existing_hash IS DISTINCT FROM p_payload_hash THEN
            RAISE EXCEPTION 'idempotency conflict on a result' USING ERRCODE = 'RX409';
        END IF;
        SELECT o.event_id INTO event_id FROM pipeline_outboxevent o
        WHERE o.topic = p_topic AND o.idempotency_key = p_key;
        outcome := 'deduped';
        RETURN;
    END IF;

    IF p_hand_off THEN  -- the review first: a key or event id that has one already leaves it to the relay
        INSERT INTO pipeline_review (tenant, document_id, idempotency_key, event_id, job_id, status, created_at)
        VALUES (p_tenant, p_event_payload ->> 'document_id', p_key, p_event_id, p_job_id, 'pending', p_now)
        ON CONFLICT DO NOTHING;
        handed_off := FOUND;
    END IF;
    INSERT INTO pipeline_outboxevent (event_id, tenant, topic, idempotency_key, payload, created_at,
                                      publish_attempts, failures, last_failure, published_at)
    VALUES (p_event_id, p_tenant, p_topic, p_key, p_event_payload, p_now, CASE WHEN handed_off THEN 1 ELSE 0 END,
            0, '', CASE WHEN handed_off THEN p_now END)
    ON CONFLICT (topic, idempotency_key) DO NOTHING
    RETURNING pipeline_outboxevent.event_id INTO event_id;
    IF event_id IS NULL THEN  -- an event without a result: only code bypassing the commit could do that
        IF handed_off THEN  -- the review was for an event that is not this one: undone
            DELETE FROM pipeline_review r WHERE r.event_id = p_event_id;
            handed_off := false;
        END IF;
        SELECT o.event_id INTO event_id FROM pipeline_outboxevent o
        WHERE o.topic = p_topic AND o.idempotency_key = p_key;
    ELSIF handed_off THEN
        INSERT INTO pipeline_consumedevent (consumer, event_id, consumed_at) VALUES (p_consumer, p_event_id, p_now);
    ELSIF p_notify THEN
        PERFORM pg_notify('relayops_outbox', '');
    END IF;
    outcome := 'committed';
END $$;
"""

COMMIT_AND_CLAIM = """
CREATE OR REPLACE FUNCTION relayops_commit_and_claim(
    p_job_id bigint, p_fence bigint, p_from varchar[], p_now timestamptz, p_tenant varchar, p_key varchar,
    p_payload_hash varchar, p_data jsonb, p_topic varchar, p_event_id uuid, p_event_payload jsonb, p_notify boolean,
    p_report boolean, p_extractor varchar, p_model_name varchar, p_prompt_hash varchar, p_input_tokens integer,
    p_output_tokens integer, p_inference_seconds double precision, p_cost numeric,
    p_hand_off boolean, p_consumer varchar,
    p_claim_now timestamptz, p_worker varchar, p_lease_until timestamptz)
RETURNS TABLE (outcome text, result_id bigint, event_id uuid, handed_off boolean, claim_seconds double precision,
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
        p_output_tokens, p_inference_seconds, p_cost, p_hand_off, p_consumer);
    outcome := committed.outcome;
    result_id := committed.result_id;
    event_id := committed.event_id;
    handed_off := committed.handed_off;
    IF committed.outcome = 'stale' THEN  -- not this lease's: nothing was written, nothing is claimed
        RETURN NEXT;
        RETURN;
    END IF;
    v_started := clock_timestamp();
    -- The claim's function runs to its end before this row is made: clock_timestamp() reads after it.
    RETURN QUERY SELECT committed.outcome, committed.result_id, committed.event_id, committed.handed_off,
        extract(epoch FROM clock_timestamp() - v_started)::double precision, claimed.*
    FROM relayops_claim(p_claim_now, p_worker, p_lease_until) AS claimed;
    IF NOT FOUND THEN  -- nothing was claimable: the commit's row alone
        claim_seconds := extract(epoch FROM clock_timestamp() - v_started);
        RETURN NEXT;
    END IF;
END $$;
"""

# The new functions are overloads: the old ones (20 and 23 arguments) stay, so the workers of the release
# before keep committing while a rolling deploy replaces them. A later migration may drop them.
DROP = """
DROP FUNCTION IF EXISTS relayops_commit_and_claim(
    bigint, bigint, varchar[], timestamptz, varchar, varchar, varchar, jsonb, varchar, uuid, jsonb, boolean, boolean,
    varchar, varchar, varchar, integer, integer, double precision, numeric, boolean, varchar, timestamptz, varchar,
    timestamptz);
DROP FUNCTION IF EXISTS relayops_commit_result(
    bigint, bigint, varchar[], timestamptz, varchar, varchar, varchar, jsonb, varchar, uuid, jsonb, boolean, boolean, varchar,
    varchar, varchar, integer, integer, double precision, numeric, boolean, varchar);
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(COMMIT_RESULT, params=None)
        schema_editor.execute(COMMIT_AND_CLAIM, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0019_commit_and_claim_function")]
    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
