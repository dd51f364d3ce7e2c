"""Transactional outbox: the result, its event and the job's completion commit together, or not at all.

Other effects emit their event the same way, inside the transaction of the change (``emit``): a review
decision's ``review.decided`` commits with the decision.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from django.db import DatabaseError, connection, transaction

from pipeline import sql
from pipeline.clock import Clock, system_clock
from pipeline.errors import IdempotencyConflictError, InvalidInputError, StaleLeaseError
from pipeline.extraction.report import REPORT_COLUMNS, AttemptReport
from pipeline.idempotency import canonical_json
from pipeline.models import OutboxEvent, Result
from pipeline.queue import Lease, complete
from pipeline.reconnect import CONNECTION_ERRORS
from pipeline.runtime import wakeups
from pipeline.states import JobStatus, sources_of
from relayops.logging import get_logger
from relayops.validation import check_text

log = get_logger(__name__)

RESULT_TOPIC = "extraction.completed"
REVIEW_DECIDED_TOPIC = "review.decided"  # a review approved (as extracted or corrected), with its final fields
TOPIC_MAX_LENGTH = 64  # OutboxEvent.topic


@dataclass(frozen=True)
class CommitOutcome:
    result_id: int
    event_id: uuid.UUID
    deduped: bool
    # With ``claim_next``: the claim's row (``sql.claim_job``'s shape; None when nothing was claimable)
    # and the seconds the claim took of the call, so the commit's own time can be told apart.
    claimed: dict[str, Any] | None = None
    claim_seconds: float = 0.0
    # With ``hand_off``: the event was handed to the review consumer in the commit, and published with it.
    handed_off: bool = False
    # With ``also_read``: the caller's one-row read, made in the commit's statement (``also_*`` columns).
    read: dict[str, Any] | None = None
    # With ``also_write``: the rows each of the caller's writes returned (None: they did not run).
    written: tuple[int, ...] | None = None


@dataclass(frozen=True)
class HandOff:
    """A commit may hand its event to the review consumer ``consumer`` in its own transaction when ``when``
    holds: a boolean SQL expression over the event (``{event}.tenant``, ``{event}.topic``), code's, never
    input; "true" when nothing else wants events (``pipeline.relay.commit_hand_off`` builds it from the
    publishers)."""

    consumer: str
    when: str = "true"


def commit_result_with_event(
    lease: Lease, result: Any, *, topic: str = RESULT_TOPIC, clock: Clock = system_clock,
    report: AttemptReport | None = None, announce: bool = True, claim_next: dict[str, Any] | None = None,
    hand_off: HandOff | None = None, also_read: str | None = None, also_write: tuple[str, ...] = (),
) -> CommitOutcome:
    """Write the result, its outbox event and the job's completion (its attempt closed with ``report``,
    what the extraction spent) in one transaction: on PostgreSQL one round trip, the server-side
    function ``relayops_commit_result`` (``sql.COMMIT_RESULT``).

    The fence is checked first, so a zombie's late write is refused (StaleLeaseError) and nothing
    lands. If the key already has a result with the same payload hash, returns it with
    ``deduped=True``; a different hash raises IdempotencyConflictError. Either error rolls back all.
    ``announce`` rings the outbox doorbell for parked relays; a caller that relays the event itself
    next (a drain running the outbox) passes False and wakes no one.

    ``claim_next`` (a claim's parameters, ``queue.claim_params``): once the commit landed (committed or
    deduped), claim the next job as well, its row in ``claimed``. On PostgreSQL it is the same call and
    the same transaction (``relayops_commit_and_claim``); a refused commit claims nothing. SQLite claims
    in a transaction of its own after the commit's.

    ``hand_off`` (PostgreSQL, the result topic): when its condition holds for the event, the commit
    creates the event's pending review and remembers its id as the review consumer's, and the event is
    written already published (``handed_off``), no doorbell rung: nothing is left for a relay. Otherwise,
    or when a review already exists for the key, the event waits for the relay as before. ``also_read``
    (PostgreSQL, without ``claim_next``): a one-row SELECT (literal SQL, its columns named ``also_*``) run
    in the commit's statement and snapshot, returned as ``read``. ``also_write`` (PostgreSQL): data-modifying
    statements, each with a RETURNING clause (literal SQL: a drain's presence record, its earlier commits'
    times) run in the commit's statement and transaction, whatever the commit's outcome (a conflict rolls
    them back with the commit); ``written`` is the number of rows each returned.
    """
    if not isinstance(lease, Lease):
        raise InvalidInputError("lease", "must be a Lease returned by lease_next")
    check_text("topic", topic, max_length=TOPIC_MAX_LENGTH)
    if report is not None and not isinstance(report, AttemptReport):
        raise InvalidInputError("report", "must be an AttemptReport or None")
    try:
        data = canonical_json(result)
    except InvalidInputError as exc:
        raise InvalidInputError("result", "must be JSON-serialisable (no NaN, sets or objects)") from exc
    now = clock.now()
    event_payload = canonical_json(
        {"job_id": lease.job_id, "tenant": lease.tenant, "document_id": lease.document_id,
         "idempotency_key": lease.idempotency_key, "operation_version": lease.operation_version}
    )
    if connection.vendor == "postgresql":
        if topic != RESULT_TOPIC:
            hand_off = None  # the review consumer takes only results' events
        return _commit_in_one_call(lease, data, event_payload, topic, now, report, announce, claim_next, hand_off,
                                   also_read if claim_next is None else None, also_write)
    outcome = _commit_statement_by_statement(lease, data, event_payload, topic, now, report)
    if claim_next is None:
        return outcome
    started = time.monotonic()
    try:
        claimed = sql.claim_job(claim_next)
    except DatabaseError:  # the commit stands; the claim's own transaction rolled back: the next step claims
        return outcome
    return replace(outcome, claimed=claimed[0] if claimed else None, claim_seconds=time.monotonic() - started)


def _commit_statement_by_statement(
    lease: Lease, data: str, event_payload: str, topic: str, now: dt.datetime, report: AttemptReport | None,
) -> CommitOutcome:
    """SQLite: the function's steps from Python, in one transaction."""
    with transaction.atomic():
        complete(lease, now, report)
        inserted = sql.fetch(sql.INSERT_RESULT, {
            "job_id": lease.job_id, "tenant": lease.tenant, "key": lease.idempotency_key,
            "payload_hash": lease.payload_hash, "data": data, "fence": lease.fence, "now": sql.ts(now),
        })
        if not inserted:
            return _existing(lease, topic)
        event_id = uuid.uuid4()
        landed = sql.fetch(sql.INSERT_EVENT, {
            "event_id": sql.uuid_param(event_id), "tenant": lease.tenant, "topic": topic,
            "key": lease.idempotency_key, "payload": event_payload, "now": sql.ts(now),
        })
        if not landed:  # an event without a result: only code bypassing this service could do that
            event_id = OutboxEvent.objects.get(topic=topic, idempotency_key=lease.idempotency_key).event_id
        return CommitOutcome(result_id=inserted[0]["id"], event_id=event_id, deduped=False)


def _commit_in_one_call(
    lease: Lease, data: str, event_payload: str, topic: str, now: dt.datetime, report: AttemptReport | None,
    announce: bool, claim_next: dict[str, Any] | None, hand_off: HandOff | None, also_read: str | None,
    also_write: tuple[str, ...],
) -> CommitOutcome:
    columns = report.columns() if report is not None else dict.fromkeys(REPORT_COLUMNS)
    params = {
        "job_id": lease.job_id, "fence": lease.fence, "from": sources_of(JobStatus.SUCCEEDED), "now": now,
        "tenant": lease.tenant, "key": lease.idempotency_key, "payload_hash": lease.payload_hash, "data": data,
        "topic": topic, "event_id": uuid.uuid4(), "event_payload": event_payload, "notify": announce,
        "report": report is not None, "consumer": hand_off.consumer if hand_off is not None else "", **columns,
    }
    if claim_next is not None:
        params.update(claim_now=claim_next["now"], claim_worker=claim_next["worker"],
                      claim_lease_until=claim_next["lease_until"])
    extras = hand_off is not None or also_read is not None or bool(also_write)
    try:
        statement = sql.with_write(_statement(claim_next is not None, hand_off.when if hand_off else None, also_read),
                                   also_write)
    except (KeyError, IndexError, ValueError) as exc:  # a publisher's ``wants`` that does not format
        log.warning("commit.extras_refused", job_id=lease.job_id, error_type=type(exc).__name__)
        return _commit_in_one_call(lease, data, event_payload, topic, now, report, announce, claim_next, None,
                                   None, ())
    # In autocommit the call is its own transaction; inside the caller's, a savepoint keeps a refused
    # commit from aborting the rest of it.
    try:
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            rows = sql.fetch(statement, params)
    except DatabaseError as exc:
        sqlstate = getattr(exc.__cause__, "sqlstate", None)
        if sqlstate == sql.RESULT_CONFLICT_SQLSTATE:
            raise IdempotencyConflictError(lease.idempotency_key, where="result") from None
        if not extras or isinstance(exc, CONNECTION_ERRORS):
            raise
        # What the caller added to the commit (the hand-off's condition or review, its read or its write)
        # failed, and the whole statement with it: nothing landed. The commit alone is not the job's
        # fault to lose, so it runs again without them (its event then waits for the relay).
        log.warning("commit.extras_failed", job_id=lease.job_id, error_type=type(exc).__name__, sqlstate=sqlstate)
        return _commit_in_one_call(lease, data, event_payload, topic, now, report, announce, claim_next, None,
                                   None, ())
    row = rows[0]
    if row["outcome"] == "stale":
        raise StaleLeaseError(lease.job_id, lease.fence)
    claimed = row if claim_next is not None and row["id"] is not None else None
    if row["handed_off"]:
        _log_handed_off(lease)
    return CommitOutcome(result_id=row["result_id"], event_id=row["event_id"], deduped=row["outcome"] == "deduped",
                         claimed=claimed, claim_seconds=row.get("claim_seconds") or 0.0,
                         handed_off=row["handed_off"], written=_written(row, len(also_write)),
                         read={k: v for k, v in row.items() if k.startswith("also_") and not k.startswith(WRITTEN)}
                         if also_read else None)


WRITTEN = "also_written_"  # the columns of the rows each caller's write returned (sql.with_write)


def _written(row: dict[str, Any], writes: int) -> tuple[int, ...] | None:
    return tuple(row[f"{WRITTEN}{n}"] for n in range(writes)) if writes else None


@functools.lru_cache(maxsize=64)
def _statement(claim: bool, hand_off: str | None, also: str | None) -> str:
    """The commit's statement: with the next job's claim, or with the caller's read, or alone (the caller's
    writes are added to it per call: their text changes)."""
    template = sql.COMMIT_RESULT_AND_CLAIM if claim else sql.COMMIT_RESULT_AND_READ if also else sql.COMMIT_RESULT
    return template.format(hand_off=sql.hand_off_argument(hand_off), also=also)


def landed(lease: Lease, topic: str = RESULT_TOPIC) -> CommitOutcome | None:
    """The outcome of ``lease``'s own commit if it landed, else None. After a connection died during
    COMMIT the caller cannot know; the result row of this job at this fence says."""
    result = Result.objects.filter(job_id=lease.job_id, fence=lease.fence).first()
    if result is None:
        return None
    event = OutboxEvent.objects.get(topic=topic, idempotency_key=lease.idempotency_key)
    # Published at the moment it was written: the commit handed it off (a relay publishes it later).
    handed_off = event.published_at is not None and event.published_at == event.created_at
    if handed_off:
        _log_handed_off(lease)
    return CommitOutcome(result_id=result.pk, event_id=event.event_id, deduped=False, handed_off=handed_off)


def _log_handed_off(lease: Lease) -> None:
    log.info("review.handed_off", tenant=lease.tenant, job_id=lease.job_id, idempotency_key=lease.idempotency_key,
             outcome="pending")


def _existing(lease: Lease, topic: str) -> CommitOutcome:
    """The key already has a result: the same input dedupes, another input is a conflict."""
    existing = Result.objects.get(idempotency_key=lease.idempotency_key)
    if existing.payload_hash != lease.payload_hash:
        raise IdempotencyConflictError(lease.idempotency_key, where="result")
    event = OutboxEvent.objects.get(topic=topic, idempotency_key=lease.idempotency_key)
    return CommitOutcome(result_id=existing.pk, event_id=event.event_id, deduped=True)


def emit(
    tenant: str, topic: str, idempotency_key: str, payload: dict[str, Any], *, clock: Clock = system_clock,
) -> uuid.UUID:
    """Write one outbox event inside the caller's transaction (it commits with the change it announces).

    One event per topic and key: emitting again for the same ``(topic, idempotency_key)`` writes nothing
    and returns the existing event's id. The relay publishes it after the commit.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("outbox.emit must run inside the transaction of the change it announces")
    check_text("topic", topic, max_length=TOPIC_MAX_LENGTH)
    try:
        data = canonical_json(payload)
    except InvalidInputError as exc:
        raise InvalidInputError("payload", "must be JSON-serialisable (no NaN, sets or objects)") from exc
    event_id = uuid.uuid4()
    landed = sql.fetch(sql.INSERT_EVENT, {
        "event_id": sql.uuid_param(event_id), "tenant": tenant, "topic": topic, "key": idempotency_key,
        "payload": data, "now": sql.ts(clock.now()),
    })
    if not landed:
        return OutboxEvent.objects.get(topic=topic, idempotency_key=idempotency_key).event_id
    wakeups.ring(wakeups.OUTBOX)
    return event_id
