"""The fenced commit as one server-side function: a worker's commit is one round trip.

``relayops_commit_result`` does what ``pipeline.outbox.commit_result_with_event`` did statement by
statement, with every check kept: the job moves to ``succeeded`` only if it is still leased at this
fence and ``p_from`` (the states ``pipeline.states.TRANSITIONS`` allows into it) holds its status (else
``stale``, nothing written); its attempt is closed with the extraction report; the result
is inserted unless its key has one: the same payload hash dedupes (``deduped``: nothing new but the
completion), another raises SQLSTATE RX409, which rolls the whole call back; the outbox event is
inserted with its doorbell. Called as one statement, it is one transaction in autocommit, or part of
the caller's. SQLite (the embedded demo) runs the same steps from Python.

Changing this function means a new migration that replaces it (``CREATE OR REPLACE``).
"""

from django.db import migrations

POSTGRES = """
CREATE OR REPLACE FUNCTION relayops_commit_result(
    p_job_id bigint, p_fence bigint, p_from varchar[], p_now timestamptz, p_tenant varchar, p_key varchar, p_payload_hash varchar,
    p_data jsonb, p_topic varchar, p_event_id uuid, p_event_payload jsonb, p_notify boolean,
    p_report boolean, p_extractor varchar, p_model_name varchar, p_prompt_hash varchar, p_input_tokens integer,
    p_output_tokens integer, p_inference_seconds double precision, p_cost numeric,
    OUT outcome text, OUT result_id bigint, OUT event_id uuid
) LANGUAGE plpgsql AS $$
DECLARE
    existing_hash varchar;
BEGIN
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

    INSERT INTO pipeline_outboxevent (event_id, tenant, topic, idempotency_key, payload, created_at,
                                      publish_attempts, failures, last_failure)
    VALUES (p_event_id, p_tenant, p_topic, p_key, p_event_payload, p_now, 0, 0, '')
    ON CONFLICT (topic, idempotency_key) DO NOTHING
    RETURNING pipeline_outboxevent.event_id INTO event_id;
    IF event_id IS NULL THEN  -- an event without a result: only code bypassing the commit could do that
        SELECT o.event_id INTO event_id FROM pipeline_outboxevent o
        WHERE o.topic = p_topic AND o.idempotency_key = p_key;
    ELSIF p_notify THEN
        PERFORM pg_notify('relayops_outbox', '');
    END IF;
    outcome := 'committed';
END $$;
"""
POSTGRES_DROP = """
DROP FUNCTION IF EXISTS relayops_commit_result(
    bigint, bigint, varchar[], timestamptz, varchar, varchar, varchar, jsonb, varchar, uuid, jsonb, boolean, boolean, varchar,
    varchar, varchar, integer, integer, double precision, numeric);
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_DROP)


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0015_measure_hours")]
    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
