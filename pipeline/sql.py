"""The raw SQL the ORM can't say well: claims with ``FOR UPDATE SKIP LOCKED`` and ``RETURNING``.

Each query is named, documented and runs with named parameters on PostgreSQL (production, tests) and
SQLite (the embedded demo, where immediate transactions serialise writers and SKIP LOCKED is not
needed). Only pipeline.queue, pipeline.outbox, pipeline.relay and pipeline.consumer run them.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.db import connection, transaction
from django.utils.dateparse import parse_datetime

from pipeline.states import JobStatus, sources_of


# A doorbell's NOTIFY payload: the ringing transaction's id, so a drain can tell whether a claim's snapshot
# saw what rang (pipeline.runtime.wake_turn). One transaction's doorbells on one channel arrive once.
NOTIFY_PAYLOAD = "pg_current_xact_id()::text"


def skip_locked() -> str:
    return "FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""


def ts(value: dt.datetime | None) -> Any:
    """A datetime as the backend stores it (SQLite keeps naive UTC text)."""
    return connection.ops.adapt_datetimefield_value(value)


def read_ts(value: Any) -> dt.datetime:
    """A non-null datetime column read by raw SQL, as an aware UTC datetime."""
    parsed = value if isinstance(value, dt.datetime) else parse_datetime(value)
    if parsed is None:
        raise ValueError(f"not a datetime: {value!r}")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def read_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def uuid_param(value: Any) -> Any:
    """UUIDs as the backend stores them (SQLite: 32 hex characters)."""
    return value.hex if connection.vendor == "sqlite" else value


def fetch(sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = _column_names(cursor)
        return [dict(zip(columns, row)) for row in cursor.fetchall()]


def _column_names(cursor: Any) -> list[str]:
    """The result's column names. On PostgreSQL read from the result itself: psycopg's ``description``
    builds a full column object (type, size, precision) for each of them, about 77 µs a call for a row
    of 27 columns on a slow VM, 3–5 % of a worker's CPU per job (docs/performance.md)."""
    raw = cursor.cursor
    result = getattr(raw, "pgresult", None)
    if result is None:
        return [col[0] for col in cursor.description]
    encoding = raw.connection.info.encoding
    return [result.fname(n).decode(encoding) for n in range(result.nfields)]


def _quoted(statuses: list[str]) -> str:
    return ", ".join(f"'{status}'" for status in statuses)  # our own enum values, never input


# The tenants whose intake an operator paused (tenancy.TenantControl). Read once per claim (a hashed
# subplan over the partial index tenantcontrol_paused, empty while nothing is paused); each candidate
# job is then one hash probe, so an unpaused fleet pays nothing measurable.
PAUSED_TENANTS = "SELECT tenant FROM tenancy_tenantcontrol WHERE intake_paused"

# The jobs a claim may take, as Job.objects.claimable(now) defines them: queued, visible, an attempt
# left; or leased with an expired lease and an expiry left; and not of a paused tenant. The states a
# job may be leased from come from states.TRANSITIONS; every row the index job_claimable holds is
# live, so it serves the filter.
CLAIMABLE = f"""
    SELECT id FROM pipeline_job
    WHERE status IN ({_quoted(sources_of(JobStatus.LEASED))}) AND visible_at <= %(now)s
      AND CASE WHEN status = 'leased'
               THEN lease_until <= %(now)s AND lease_expiries < max_lease_expiries
               ELSE attempt < max_attempts END
      AND tenant NOT IN ({PAUSED_TENANTS})
"""

# The job columns a Lease is built from (Lease.from_row).
LEASE_COLUMNS = """id, status, fence, attempt, max_attempts, tenant, document_id, operation_version,
          idempotency_key, payload, payload_hash, deadline_at, lease_until, lease_owner, leased_at"""

# The claim: the next claimable job in its place in line (visible_at, which a lease does not move: a job
# rescued from a dead worker comes before newer work), skipping rows other claimers hold. A job past its
# deadline is cancelled instead of leased. The fence grows on every lease; a fresh lease counts an
# attempt, taking over an expired one counts a lease expiry instead. Every lease is on record: the claim
# closes the attempt of a lease it took over (it expired: the worker died or stalled) and opens one per
# new lease, with ``due_at``: when the job became claimable, its visible_at or the expiry of the lease
# taken over (queue wait = leased_at - due_at).
#
# On PostgreSQL the server-side function ``relayops_claim`` (migration 0018) does all of it in one call,
# in short statements whose plans it keeps for the connection; it also says whether another job is
# claimable (``more_waiting``: a row another claimer holds counts, so it errs towards one more look, never
# towards none) and which transactions the claim saw (``snapshot``: pipeline.runtime.wake_turn compares a
# doorbell's with it). Its first statement is CLAIM_NEXT, word for word (a test compares them).
CLAIM_NEXT = f"""{CLAIMABLE.replace("SELECT id FROM", "SELECT * FROM", 1)}    ORDER BY visible_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED"""

_CLAIM_CALL = "SELECT * FROM relayops_claim(%(now)s, %(worker)s, %(lease_until)s)"

# SQLite (the embedded demo, whose immediate transactions serialise writers) runs the same steps one by one.
_CLAIM = f"""
UPDATE pipeline_job SET
    status = CASE WHEN deadline_at <= %(now)s THEN 'cancelled' ELSE 'leased' END,
    fence = CASE WHEN deadline_at <= %(now)s THEN fence ELSE fence + 1 END,
    attempt = CASE WHEN deadline_at <= %(now)s OR status = 'leased' THEN attempt ELSE attempt + 1 END,
    lease_expiries = CASE WHEN deadline_at > %(now)s AND status = 'leased' THEN lease_expiries + 1
                          ELSE lease_expiries END,
    lease_owner = CASE WHEN deadline_at <= %(now)s THEN '' ELSE %(worker)s END,
    lease_until = CASE WHEN deadline_at <= %(now)s THEN NULL ELSE %(lease_until)s END,
    leased_at = CASE WHEN deadline_at <= %(now)s THEN leased_at ELSE %(now)s END,
    finished_at = CASE WHEN deadline_at <= %(now)s THEN %(now)s ELSE NULL END,
    last_error_code = CASE WHEN deadline_at <= %(now)s THEN 'deadline_exceeded' ELSE last_error_code END
WHERE id IN ({CLAIMABLE}
    ORDER BY visible_at, id
    LIMIT 1
)
RETURNING {LEASE_COLUMNS}
"""
_END_TAKEN_OVER = """
UPDATE pipeline_attempt SET ended_at = %(now)s, error_code = 'lease_expired'
WHERE job_id = %(job_id)s AND ended_at IS NULL
"""
_OPEN_ATTEMPT = """
INSERT INTO pipeline_attempt (job_id, tenant, fence, attempt, worker, due_at, leased_at, error_code)
VALUES (%(job_id)s, %(tenant)s, %(fence)s, %(attempt)s, %(worker)s, %(due_at)s, %(now)s, '')
"""
# The row the claim is about to take, as it is (the immediate transaction holds the write lock from its
# start, so nothing changes it between this look and the claim).
_DUE_BEFORE_CLAIM = f"""
SELECT prior.id, CASE WHEN prior.status = 'leased' THEN prior.lease_until ELSE prior.visible_at END AS due_at
FROM pipeline_job prior
WHERE prior.id IN ({CLAIMABLE} ORDER BY visible_at, id LIMIT 1)
"""


def claim_job(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Claim the next claimable job (``now``, ``worker``, ``lease_until``) with its attempt bookkeeping,
    atomically: on PostgreSQL one call (one round trip in autocommit), on SQLite several statements in
    one transaction. No row: nothing was claimable."""
    if connection.vendor == "postgresql":
        return fetch(_CLAIM_CALL, params)
    with transaction.atomic():
        return _claim_statement_by_statement(params)


def _claim_statement_by_statement(params: dict[str, Any]) -> list[dict[str, Any]]:
    due = {row["id"]: row["due_at"] for row in fetch(_DUE_BEFORE_CLAIM, params)}
    rows = fetch(_CLAIM, params)
    with connection.cursor() as cursor:
        for row in rows:
            row["due_at"] = due.get(row["id"])
            cursor.execute(_END_TAKEN_OVER, {"now": params["now"], "job_id": row["id"]})
            if row["status"] == JobStatus.LEASED:
                cursor.execute(_OPEN_ATTEMPT, {"now": params["now"], "job_id": row["id"], "fence": row["fence"],
                                               "attempt": row["attempt"], "worker": row["lease_owner"],
                                               "tenant": row["tenant"], "due_at": due.get(row["id"])})
    return rows


# Insert a result unless its key already has one; RETURNING is empty on conflict.
INSERT_RESULT = """
INSERT INTO pipeline_result (job_id, tenant, idempotency_key, payload_hash, data, fence, created_at)
VALUES (%(job_id)s, %(tenant)s, %(key)s, %(payload_hash)s, %(data)s, %(fence)s, %(now)s)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id
"""

# Insert the result's outbox event unless the key already has one on this topic.
INSERT_EVENT = """
INSERT INTO pipeline_outboxevent (event_id, tenant, topic, idempotency_key, payload, created_at,
                                  publish_attempts, failures, last_failure)
VALUES (%(event_id)s, %(tenant)s, %(topic)s, %(key)s, %(payload)s, %(now)s, 0, 0, '')
ON CONFLICT (topic, idempotency_key) DO NOTHING
RETURNING event_id
"""

# Claim pending outbox rows (OutboxEvent.objects.pending) for a short while, with a token: no
# transaction stays open across the publish, and only the holder of a current claim may mark a row
# published. A row backing off after a failed publish (next_attempt_at) waits; a row parked after too
# many failures (parked_at) or interrupted max_attempts times is left pending, visible to operators,
# and not retried until one redelivers it. Two index scans that stop at their limit: rows never failed
# (outbox_fresh, in id order) and rows whose backoff ended (outbox_backoff, by due time); a backlog of
# rows still backing off is never read. ``{facts}``: what the publishers ask the claim to read about each
# row (``claim_facts``; ``claim_fact_columns`` writes them), in the same round trip and snapshot.
CLAIM_EVENTS = """
WITH fresh AS (
    SELECT id FROM pipeline_outboxevent
    WHERE published_at IS NULL AND parked_at IS NULL AND next_attempt_at IS NULL
      AND (claimed_until IS NULL OR claimed_until < %(now)s) AND publish_attempts < %(max_attempts)s
    ORDER BY id
    LIMIT %(limit)s
    {skip_locked}
), due AS (
    SELECT id FROM pipeline_outboxevent
    WHERE published_at IS NULL AND parked_at IS NULL AND next_attempt_at <= %(now)s
      AND (claimed_until IS NULL OR claimed_until < %(now)s) AND publish_attempts < %(max_attempts)s
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    {skip_locked}
)
UPDATE pipeline_outboxevent SET
    claim_token = %(token)s, claimed_until = %(claimed_until)s, publish_attempts = publish_attempts + 1
WHERE id IN (SELECT id FROM (SELECT id FROM fresh UNION ALL SELECT id FROM due) AS pending ORDER BY id LIMIT %(limit)s)
RETURNING id, event_id, tenant, topic, idempotency_key, payload, created_at, failures{facts}
"""

# The fenced commit in one round trip (the function is migration 0020_hand_off_in_commit's, first
# 0016_commit_function's): job completion, attempt closed with its report, result, outbox event and its
# doorbell, or nothing. Its outcome is ``committed``, ``deduped`` (the key's result has this payload
# hash) or ``stale`` (not leased at this fence: nothing written); a result of another payload hash raises
# SQLSTATE RX409 and the call rolls back. ``{hand_off}``: whether the commit may hand its event to the
# review consumer (``%(consumer)s``) itself, published at once (``handed_off``); ``hand_off_argument``
# writes it.
_COMMIT_ARGUMENTS = """
    %(job_id)s, %(fence)s, %(from)s, %(now)s, %(tenant)s, %(key)s, %(payload_hash)s, %(data)s, %(topic)s, %(event_id)s,
    %(event_payload)s, %(notify)s, %(report)s, %(extractor)s, %(model_name)s, %(prompt_hash)s,
    %(input_tokens)s, %(output_tokens)s, %(inference_seconds)s, %(cost)s, {hand_off}, %(consumer)s"""
COMMIT_RESULT = f"""
SELECT outcome, result_id, event_id, handed_off FROM relayops_commit_result({_COMMIT_ARGUMENTS}) AS committed
"""
RESULT_CONFLICT_SQLSTATE = "RX409"

# The commit of one job and the claim of the next in one call and one transaction (relayops_commit_and_claim,
# migration 0020's, first 0019's: relayops_commit_result, then relayops_claim unless the commit was stale).
# Its row: the commit's columns, ``claim_seconds`` (the claim's server time) and the claim's columns (null
# when nothing was claimable).
COMMIT_RESULT_AND_CLAIM = f"""
SELECT * FROM relayops_commit_and_claim({_COMMIT_ARGUMENTS},
    %(claim_now)s, %(claim_worker)s, %(claim_lease_until)s) AS committed
"""

# The commit with a one-row read of the caller's (``{also}``: its columns named ``also_*``) in the same
# statement and snapshot, taken as the statement starts: what the commit writes is not in it (its own job
# still reads as leased). A read that returns no row leaves its columns null, never the commit's row out.
COMMIT_RESULT_AND_READ = f"""
SELECT committed.*, also.* FROM relayops_commit_result({_COMMIT_ARGUMENTS}) AS committed
LEFT JOIN ({{also}}) AS also ON true
"""


def with_write(statement: str, writes: tuple[str, ...]) -> str:
    """``statement`` (one of the commit's, its function's row aliased ``committed``) with the caller's own
    data-modifying statements ``writes`` (literal SQL, each with a RETURNING clause) in the same statement
    and transaction, and a column ``also_written_N`` for each: the rows the Nth returned."""
    if not writes:
        return statement
    select, rest = statement.strip().split(" ", 1)
    assert select == "SELECT", statement
    ctes = ", ".join(f"written_{n} AS ({write})" for n, write in enumerate(writes))
    counts = ", ".join(f"(SELECT count(*) FROM written_{n}) AS also_written_{n}" for n in range(len(writes)))
    return f"WITH {ctes} SELECT {counts}, {rest}"


def hand_off_argument(when: str | None) -> str:
    """The commit's ``p_hand_off`` argument: ``false`` (never), or ``when``, a boolean SQL expression over
    the event (``{event}.tenant``, ``{event}.topic``: the commit's own), read in the commit's statement.
    The expression is code's (the publishers' ``wants``), never input."""
    if when is None:
        return "false"
    if when.strip().lower() == "true":
        return "true"
    event = "(SELECT %(tenant)s::varchar AS tenant, %(topic)s::varchar AS topic) AS pipeline_outboxevent"
    return f"COALESCE((SELECT ({when.format(event='pipeline_outboxevent')}) FROM {event}), false)"


# Many commits' times onto their attempt rows in one statement (parallel arrays: job, fence, seconds); with
# RETURNING 1 it is also a write another statement of the drain's runs with its own (a commit's).
RECORD_COMMIT_TIMES = """
UPDATE pipeline_attempt SET commit_seconds = t.seconds
FROM unnest(%(jobs)s::bigint[], %(fences)s::bigint[], %(seconds)s::float8[]) AS t(job_id, fence, seconds)
WHERE pipeline_attempt.job_id = t.job_id AND pipeline_attempt.fence = t.fence
"""

# Insert a consumed event id unless it is already remembered; RETURNING is empty for a duplicate.
INSERT_CONSUMED = """
INSERT INTO pipeline_consumedevent (consumer, event_id, consumed_at)
VALUES (%(consumer)s, %(event_id)s, %(now)s)
ON CONFLICT (consumer, event_id) DO NOTHING
RETURNING id
"""


# The review consumer's work on a set of events (``incoming``: event_id, tenant, document_id,
# idempotency_key, job_id): remember each event id unless already consumed, and hand off a pending review
# for each one new (a republished event finds its id remembered and does nothing). ``reviews`` lists the
# reviews created.
_APPLY_REVIEWS = """
consumed AS (
    INSERT INTO pipeline_consumedevent (consumer, event_id, consumed_at)
    SELECT %(consumer)s, event_id, %(now)s FROM incoming
    ON CONFLICT (consumer, event_id) DO NOTHING
    RETURNING event_id
), reviews AS (
    INSERT INTO pipeline_review (tenant, document_id, idempotency_key, event_id, job_id, status, created_at)
    SELECT incoming.tenant, incoming.document_id, incoming.idempotency_key, incoming.event_id, incoming.job_id,
           'pending', %(now)s
    FROM incoming JOIN consumed ON consumed.event_id = incoming.event_id
    RETURNING tenant, job_id, idempotency_key, event_id
)"""

# The review consumer's batch in one statement; the events come as parallel arrays.
CONSUME_REVIEWS = f"""
WITH incoming (event_id, tenant, document_id, idempotency_key, job_id) AS (
    SELECT * FROM unnest(%(event_ids)s::uuid[], %(tenants)s::varchar[], %(documents)s::varchar[],
                         %(keys)s::varchar[], %(jobs)s::bigint[])
), {_APPLY_REVIEWS}
SELECT tenant, job_id, idempotency_key FROM reviews
"""

# The relay's claim with the review consumer's work on the claimed events of its topic, in one
# statement, when the review consumer is the relay's first publisher (``handed_off``: a review was
# created for the row's event). At-least-once as before: a relay that dies before marking the rows
# published leaves them to a later claim, whose consumer finds their ids remembered. A payload the
# review cannot be made from fails the whole statement, claim included: the relay then claims alone
# and the consumer takes the events one by one, so the bad one fails by itself.
_HAND_OFF = f"""
WITH claimed AS ({CLAIM_EVENTS}), incoming AS (
    SELECT event_id, tenant, payload ->> 'document_id' AS document_id, idempotency_key,
           (payload ->> 'job_id')::bigint AS job_id
    FROM claimed WHERE topic = %(review_topic)s
), {_APPLY_REVIEWS}
"""
CLAIM_EVENTS_AND_HAND_OFF = _HAND_OFF + """
SELECT claimed.*, reviews.event_id IS NOT NULL AS handed_off
FROM claimed LEFT JOIN reviews ON reviews.event_id = claimed.event_id
"""

# Either claim with a one-row read of the caller's (``{also}``: its columns named ``also_*``) in the same
# statement and snapshot: one row with the read and no claimed columns when nothing was claimed.
CLAIM_EVENTS_AND_READ = f"""
WITH claimed AS ({CLAIM_EVENTS})
SELECT claimed.*, also.* FROM ({{also}}) AS also LEFT JOIN claimed ON true
"""
CLAIM_EVENTS_AND_HAND_OFF_AND_READ = _HAND_OFF + """
SELECT claimed.*, reviews.event_id IS NOT NULL AS handed_off, also.*
FROM ({also}) AS also LEFT JOIN (claimed LEFT JOIN reviews ON reviews.event_id = claimed.event_id) ON true
"""

# Enqueue in one statement: insert the job unless its key (or its tenant, document and version, the
# same thing) already has one, and ring the jobs doorbell only when a row was inserted. The NOTIFY
# runs in the statement's own transaction (the caller's, or the statement's autocommit one), so it is
# delivered exactly when the row commits. RETURNING is empty when the job already existed.
_INSERT_JOB = """
INSERT INTO pipeline_job ({columns}) VALUES ({values})
ON CONFLICT DO NOTHING
RETURNING id
"""
_ENQUEUE = f"WITH inserted AS ({{insert}}) SELECT id, pg_notify(%(_channel)s, {NOTIFY_PAYLOAD}) FROM inserted"


def claim_fact_columns(facts: dict[str, str]) -> str:
    """The RETURNING columns of the publishers' claim facts: name -> a scalar SQL expression over the
    claimed outbox row, written ``{event}.column`` (names are identifiers; the expressions are code's,
    never input)."""
    columns = []
    for name, expression in sorted(facts.items()):
        if not name.isidentifier() or not name.isascii():
            raise ValueError(f"claim fact name {name!r} is not an identifier")
        columns.append(f", ({expression.format(event='pipeline_outboxevent')}) AS fact_{name}")
    return "".join(columns)


def insert_job(values: dict[str, Any], *, notify_channel: str) -> int | None:
    """Insert a job row from ``values`` (column name -> value as the backend stores it) and, on
    PostgreSQL, NOTIFY ``notify_channel`` in the same statement. Returns the new id, or None when a
    job with the same key already exists (nothing written, nothing rung). SQLite (no NOTIFY, no
    data-modifying CTE: its drains poll) runs the insert alone."""
    columns = list(values)
    insert = _INSERT_JOB.format(
        columns=", ".join(connection.ops.quote_name(column) for column in columns),
        values=", ".join(f"%({column})s" for column in columns),
    )
    if connection.vendor == "postgresql":
        rows = fetch(_ENQUEUE.format(insert=insert), {**values, "_channel": notify_channel})
    else:
        rows = fetch(insert, values)
    return rows[0]["id"] if rows else None


# Extend many leases in one statement, each to its own expiry (leases may differ in length). Each is
# guarded as every lease holder's write is: this job, this fence, still leased. RETURNING names the
# leases that were extended; one missing from it is no longer held. PostgreSQL takes the leases as
# three arrays (one statement text for any number of leases); SQLite, one VALUES row per lease.
_EXTEND_LEASES = """
UPDATE pipeline_job AS job SET lease_until = beat.lease_until
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(until)s::timestamptz[]) AS beat (id, fence, lease_until)
WHERE job.id = beat.id AND job.fence = beat.fence AND job.status = 'leased'
RETURNING job.id, job.fence
"""
_EXTEND_LEASES_SQLITE = """
UPDATE pipeline_job SET lease_until = beat.column3
FROM (VALUES {rows}) AS beat
WHERE pipeline_job.id = beat.column1 AND pipeline_job.fence = beat.column2 AND pipeline_job.status = 'leased'
RETURNING id, fence
"""


def extend_leases(leases: list[tuple[int, int, dt.datetime]]) -> set[tuple[int, int]]:
    """Set each held lease's ``lease_until`` (``(job_id, fence, lease_until)``) in one statement;
    returns the ``(job_id, fence)`` of those extended."""
    if not leases:
        return set()
    if connection.vendor == "postgresql":
        rows = fetch(_EXTEND_LEASES, {"ids": [job_id for job_id, _, _ in leases],
                                      "fences": [fence for _, fence, _ in leases],
                                      "until": [until for _, _, until in leases]})
    else:
        params: dict[str, Any] = {}
        for n, (job_id, fence, until) in enumerate(leases):
            params.update({f"id{n}": job_id, f"fence{n}": fence, f"until{n}": ts(until)})
        values = ", ".join(f"(%(id{n})s, %(fence{n})s, %(until{n})s)" for n in range(len(leases)))
        rows = fetch(_EXTEND_LEASES_SQLITE.format(rows=values), params)
    return {(row["id"], row["fence"]) for row in rows}
