"""The queue service: enqueue, lease, heartbeat (one lease, or many in one statement), complete, nack,
release, expire, and an operator's cancel and run-now. The only code that moves a job.

Every change of a job's status, lease or fence is one guarded write that reports whether it landed:
a lease holder's writes are guarded by ``id``, ``fence`` and ``status = 'leased'``, and every status
write by the source states ``states.TRANSITIONS`` allows. A lease whose fence is not current raises
StaleLeaseError and changes nothing. The same transactions keep ``pipeline_attempt`` (one row per
lease, closed with its outcome and the attempt's extraction report) and write the dead letter of a
job that failed for good.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, QuerySet

from pipeline import sql
from pipeline.clock import Clock, system_clock
from pipeline.errors import IdempotencyConflictError, InvalidInputError, StaleLeaseError, ValidationFailed
from pipeline.extraction.report import AttemptReport
from pipeline.idempotency import build_idempotency_key, canonical_json, payload_hash
from pipeline.joblog import job_fields
from pipeline.models import DEFAULT_MAX_LEASE_EXPIRIES, Attempt, DeadLetter, Job
from pipeline.reasons import DeadLetterReason, ErrorCode, ValidationRule
from pipeline.retry import DEFAULT_POLICY, Cancel, DeadLetter as DeadLetterDecision, Decision, Retry, RetryPolicy
from pipeline.retry import classify, not_before
from pipeline.runtime import wakeups
from pipeline.states import TERMINAL_STATUSES, JobStatus, sources_of
from relayops.logging import get_logger
from relayops.validation import check_int, check_number, check_text

log = get_logger(__name__)

DEFAULT_DEADLINE = dt.timedelta(hours=1)
MAX_ATTEMPTS_LIMIT = 100
ENQUEUE_TRIES = 3  # a key's job found by the insert but gone by its lookup (deleted meanwhile): try again


@dataclass(frozen=True)
class Lease:
    """A worker's hold on a job, with the fencing token every later write must present."""

    job_id: int
    fence: int
    lease_until: dt.datetime
    worker_id: str
    attempt: int
    max_attempts: int
    tenant: str
    document_id: str
    operation_version: int
    idempotency_key: str
    payload: Any
    payload_hash: str
    deadline_at: dt.datetime
    leased_at: dt.datetime | None = None
    due_at: dt.datetime | None = None  # when the job became claimable for this lease (the claim says)
    more_waiting: bool = True  # another job was claimable when this one was claimed (False: the claim said none)
    snapshot: str | None = None  # the claim's snapshot (pg_snapshot text: xmin:xmax:xip,...), on PostgreSQL

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Lease:
        """The lease of a leased job's row (``sql.LEASE_COLUMNS``, from the claim or from ``.values()``)."""
        return cls(
            job_id=row["id"], fence=row["fence"], lease_until=sql.read_ts(row["lease_until"]),
            worker_id=row["lease_owner"], attempt=row["attempt"], max_attempts=row["max_attempts"],
            tenant=row["tenant"], document_id=row["document_id"], operation_version=row["operation_version"],
            idempotency_key=row["idempotency_key"], payload=sql.read_json(row["payload"]),
            payload_hash=row["payload_hash"], deadline_at=sql.read_ts(row["deadline_at"]),
            leased_at=sql.read_ts(row["leased_at"]) if row.get("leased_at") else None,
            due_at=sql.read_ts(row["due_at"]) if row.get("due_at") else None,
            more_waiting=bool(row.get("more_waiting", True)), snapshot=row.get("snapshot"),
        )

    @property
    def queue_wait_seconds(self) -> float | None:
        """Due to leased: how long the job waited in line for this lease (None when not known)."""
        if self.due_at is None or self.leased_at is None:
            return None
        return max((self.leased_at - self.due_at).total_seconds(), 0.0)


LEASE_FIELDS = tuple(name.strip() for name in sql.LEASE_COLUMNS.split(","))


def lease_seconds_or_default(value: float | None) -> float:
    """``value``, or the configured lease length when None; InvalidInputError outside (0, 86400]."""
    seconds = settings.RELAYOPS["LEASE_SECONDS"] if value is None else value
    return check_number("lease_seconds", seconds, above=0, high=86400)


def _deadline(deadline: dt.datetime | dt.timedelta | None, now: dt.datetime) -> dt.datetime:
    if deadline is None:
        return now + DEFAULT_DEADLINE
    if isinstance(deadline, dt.timedelta):
        if deadline <= dt.timedelta(0):
            raise InvalidInputError("deadline", "must be a positive duration")
        return now + deadline
    if isinstance(deadline, dt.datetime):
        if deadline.tzinfo is None:
            raise InvalidInputError("deadline", "must be timezone-aware")
        if deadline <= now:
            raise InvalidInputError("deadline", "must be in the future")
        return deadline
    raise InvalidInputError("deadline", "must be a datetime, a timedelta or None")


def enqueue(
    tenant_id: str,
    document_id: str,
    operation_version: int,
    payload: Any,
    *,
    max_attempts: int = 3,
    max_lease_expiries: int = DEFAULT_MAX_LEASE_EXPIRIES,
    deadline: dt.datetime | dt.timedelta | None = None,
    reprocessed_from: Job | None = None,
    clock: Clock = system_clock,
) -> tuple[Job, bool]:
    """Create the job for ``tenant:document:vN`` and ring the doorbell, in one statement (one round
    trip: ``sql.insert_job``; the NOTIFY is delivered when the row commits).

    Same key and same payload returns the existing job and ``created=False``; same key and another
    payload raises IdempotencyConflictError. Nothing is written in either case; the key's job is
    looked up only then (a concurrent enqueue of the same key waits for the first to commit).
    """
    key = build_idempotency_key(tenant_id, document_id, operation_version)
    digest = payload_hash(payload)
    attempts = check_int("max_attempts", max_attempts, low=1, high=MAX_ATTEMPTS_LIMIT)
    expiries = check_int("max_lease_expiries", max_lease_expiries, low=1, high=MAX_ATTEMPTS_LIMIT)
    now = clock.now()
    deadline_at = _deadline(deadline, now)
    job = Job(
        tenant=tenant_id, document_id=document_id, operation_version=operation_version, idempotency_key=key,
        payload=payload, payload_hash=digest, max_attempts=attempts, max_lease_expiries=expiries, created_at=now,
        visible_at=now, deadline_at=deadline_at, reprocessed_from=reprocessed_from,
    )
    # Happy path: one statement (insert + doorbell). The key's job is looked up only when it exists.
    for _ in range(ENQUEUE_TRIES):
        job_id = sql.insert_job(_job_columns(job), notify_channel=wakeups.JOBS)
        if job_id is not None:
            job.pk = job_id
            job._state.adding, job._state.db = False, connection.alias
            log.info("job.enqueued", tenant=job.tenant, job_id=job.pk, idempotency_key=key, fence=0, attempt=0,
                     outcome="queued", operation_version=operation_version)
            return job, True
        existing = Job.objects.filter(idempotency_key=key).first()
        if existing is not None:
            if existing.payload_hash != digest:
                raise IdempotencyConflictError(key)
            return existing, False
    raise IntegrityError(f"enqueue of {key} kept conflicting with a row it could not find")


def _job_columns(job: Job) -> dict[str, Any]:
    """A new job's row as the backend stores it: every column but the id, as Django's own insert
    would write it (defaults included)."""
    return {
        str(field.column): field.get_db_prep_save(getattr(job, field.attname), connection)
        for field in Job._meta.concrete_fields if not field.primary_key
    }


def lease_next(worker_id: str, *, lease_seconds: float | None = None, clock: Clock = system_clock) -> Lease | None:
    """Lease the oldest claimable job (``Job.objects.claimable``), or return None.

    One call (``sql.claim_job``: the server-side function ``relayops_claim`` on PostgreSQL) with FOR
    UPDATE SKIP LOCKED: concurrent workers never hold the same job, and the fence grows on every lease.
    A job found past its deadline is cancelled instead, and the next one is tried. The attempt row of
    the new lease is written with it. A worker committing a job can claim the next in the same call
    (``claim_params``, ``take_claimed``: ``outbox.commit_result_with_event``'s ``claim_next``).
    """
    while True:
        rows = sql.claim_job(claim_params(worker_id, lease_seconds=lease_seconds, clock=clock))
        if not rows:
            return None
        lease = take_claimed(rows[0])
        if lease is not None:
            return lease
        # cancelled past its deadline (recorded on the job row): try the next one


def claim_params(worker_id: str, *, lease_seconds: float | None = None, clock: Clock = system_clock) -> dict[str, Any]:
    """A claim's parameters for ``worker_id``, now: ``now``, ``worker`` and ``lease_until``."""
    check_text("worker_id", worker_id, max_length=200)
    seconds = lease_seconds_or_default(lease_seconds)
    now = clock.now()
    return {"now": sql.ts(now), "worker": worker_id, "lease_until": sql.ts(now + dt.timedelta(seconds=seconds))}


def take_claimed(row: Mapping[str, Any]) -> Lease | None:
    """The lease a claim's row gives (logged as leased), or None for a job the claim found past its
    deadline and cancelled (logged as cancelled)."""
    if row["status"] == JobStatus.CANCELLED:
        log.info("job.cancelled", tenant=row["tenant"], job_id=row["id"], idempotency_key=row["idempotency_key"],
                 fence=row["fence"], attempt=row["attempt"], outcome="cancelled", code=ErrorCode.DEADLINE_EXCEEDED)
        return None
    lease = Lease.from_row(row)
    log.info("job.leased", **job_fields(lease, "leased", worker=lease.worker_id))
    return lease


def _check_lease(lease: object) -> Lease:
    if not isinstance(lease, Lease):
        raise InvalidInputError("lease", "must be a Lease returned by lease_next")
    return lease


def _held(job_id: int, fence: int) -> QuerySet[Job]:
    """The guard of every lease holder's write: this job, this fence, still leased."""
    return Job.objects.filter(pk=job_id, fence=fence, status=JobStatus.LEASED)


def _move(jobs: QuerySet[Job], to: JobStatus, **fields: Any) -> bool:
    """The one status write: it lands only from a state TRANSITIONS allows into ``to``."""
    return bool(jobs.filter(status__in=sources_of(to)).update(status=to, **fields))


def _end_attempt(
    job_id: int, fence: int, now: dt.datetime, code: ErrorCode | str, *, report: AttemptReport | None = None,
    rule: str = "",
) -> None:
    """Close the lease's attempt row with its code, the failed rule and the extraction report."""
    columns = report.columns() if report is not None else {}
    Attempt.objects.filter(job_id=job_id, fence=fence, ended_at__isnull=True).update(
        ended_at=now, error_code=code, failed_rule=rule, **columns)


def _finish(
    job_id: int, fence: int, to: JobStatus, now: dt.datetime, *, attempt_code: ErrorCode | str, last_error: str,
    dead_letter: DeadLetterReason | None = None, report: AttemptReport | None = None, rule: str = "",
    **fields: Any,
) -> bool:
    """Move a leased job to ``to`` and close its attempt; a dead letter is recorded with it.
    Callers hold the transaction."""
    if to in TERMINAL_STATUSES:
        fields["finished_at"] = now
    if not _move(_held(job_id, fence), to, last_error_code=last_error, lease_until=None, **fields):
        return False
    _end_attempt(job_id, fence, now, attempt_code, report=report, rule=rule)
    if dead_letter is not None:
        job = Job.objects.only("tenant", "attempt").get(pk=job_id)
        DeadLetter.objects.create(
            job_id=job_id, tenant=job.tenant, reason_code=DeadLetterReason(dead_letter),
            error_code=ErrorCode(last_error) if last_error else "", failed_rule=rule, attempts=job.attempt,
            created_at=now,
        )
    return True


def _check_report(report: object) -> AttemptReport | None:
    if report is not None and not isinstance(report, AttemptReport):
        raise InvalidInputError("report", "must be an AttemptReport or None")
    return report


def heartbeat(lease: Lease, *, lease_seconds: float | None = None, clock: Clock = system_clock) -> Lease:
    """Extend a current lease; returns the lease with its new expiry."""
    lease = _check_lease(lease)
    lease_until = clock.now() + dt.timedelta(seconds=lease_seconds_or_default(lease_seconds))
    if not _held(lease.job_id, lease.fence).update(lease_until=lease_until):
        raise StaleLeaseError(lease.job_id, lease.fence)
    return replace(lease, lease_until=lease_until)


def heartbeat_many(extensions: Sequence[tuple[Lease, dt.datetime]]) -> dict[tuple[int, int], Lease]:
    """Extend many leases in one statement, each to its own expiry (``(lease, lease_until)``), as a
    worker's heartbeat does for all the leases it holds. Returns the extended leases with their new
    expiry by ``(job_id, fence)``; a lease missing from it is no longer held (as StaleLeaseError)."""
    if not isinstance(extensions, (list, tuple)) or not all(
            isinstance(pair, tuple) and len(pair) == 2 for pair in extensions):
        raise InvalidInputError("extensions", "must be a list of (lease, lease_until) pairs")
    for lease, until in extensions:
        _check_lease(lease)
        if not isinstance(until, dt.datetime) or until.tzinfo is None:
            raise InvalidInputError("lease_until", "must be a timezone-aware datetime")
    extended = sql.extend_leases([(lease.job_id, lease.fence, until) for lease, until in extensions])
    return {(lease.job_id, lease.fence): replace(lease, lease_until=until)
            for lease, until in extensions if (lease.job_id, lease.fence) in extended}


def complete(lease: Lease, now: dt.datetime, report: AttemptReport | None = None) -> None:
    """Mark the leased job succeeded, or raise StaleLeaseError. Callers own the transaction (the outbox's)."""
    report = _check_report(report)
    if not _move(_held(lease.job_id, lease.fence), JobStatus.SUCCEEDED, finished_at=now, lease_until=None):
        raise StaleLeaseError(lease.job_id, lease.fence)
    _end_attempt(lease.job_id, lease.fence, now, "", report=report)


def record_report(lease: Lease, report: AttemptReport) -> bool:
    """Keep what an attempt spent when it could not close its own row (its lease was lost meanwhile):
    the tokens were spent and count against the document's budget. Guard: that attempt has no report
    yet. Changes nothing on the job. Returns whether it landed."""
    lease = _check_lease(lease)
    if _check_report(report) is None:
        raise InvalidInputError("report", "must be an AttemptReport")
    return bool(Attempt.objects.filter(job_id=lease.job_id, fence=lease.fence, extractor="").update(**report.columns()))


def record_commit_seconds(lease: Lease, seconds: float) -> bool:
    """Keep how long this lease's commit took (measured by its worker around the commit transaction)
    on its attempt row. Changes nothing on the job. Returns whether it landed."""
    lease = _check_lease(lease)
    seconds = max(check_number("seconds", seconds, above=-1, high=86400), 0.0)
    return bool(Attempt.objects.filter(job_id=lease.job_id, fence=lease.fence).update(commit_seconds=seconds))


def record_commit_times(times: list[tuple[int, int, float]]) -> int:
    """Keep many commits' times, ``(job_id, fence, seconds)`` each, in one statement (a drain records
    those its commits did not carry: ``commit_times_write``). Changes nothing on the jobs. Returns the
    rows written."""
    rows = _commit_time_rows(times)
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        return sum(Attempt.objects.filter(job_id=job_id, fence=fence).update(commit_seconds=seconds)
                   for job_id, fence, seconds in rows)
    with connection.cursor() as cursor:
        cursor.execute(sql.RECORD_COMMIT_TIMES, _commit_time_arrays(rows))
        return cursor.rowcount


def commit_times_write(times: list[tuple[int, int, float]]) -> str | None:
    """``record_commit_times(times)`` as literal SQL with ``RETURNING 1``, for another statement of the
    drain's to run with its own (its next commit's: ``outbox.commit_result_with_event``'s ``also_write``),
    so a drain's commits' times cost no round trip of their own. PostgreSQL only (None else, or when
    ``times`` is empty)."""
    rows = _commit_time_rows(times)
    if not rows or connection.vendor != "postgresql":
        return None
    postgresql_ops: Any = connection.ops  # PostgreSQL's operations compose SQL with its literals
    literal = postgresql_ops.compose_sql(sql.RECORD_COMMIT_TIMES.strip(), _commit_time_arrays(rows))
    return literal.replace("%", "%%") + " RETURNING 1"


def _commit_time_rows(times: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    return [(check_int("job_id", job_id, low=1), check_int("fence", fence, low=1),
             max(check_number("seconds", seconds, above=-1, high=86400), 0.0)) for job_id, fence, seconds in times]


def _commit_time_arrays(rows: list[tuple[int, int, float]]) -> dict[str, list[Any]]:
    return {"jobs": [r[0] for r in rows], "fences": [r[1] for r in rows], "seconds": [r[2] for r in rows]}


def ack(lease: Lease, *, clock: Clock = system_clock) -> None:
    """Complete a job that produces no result. Jobs with a result use commit_result_with_event."""
    lease = _check_lease(lease)
    with transaction.atomic():
        complete(lease, clock.now())


def nack(
    lease: Lease,
    error: BaseException,
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    clock: Clock = system_clock,
    rng: random.Random | None = None,
    report: AttemptReport | None = None,
) -> Decision:
    """Record a failed attempt and apply the policy's one decision: retry (never before the error's
    ``retry_after``), dead-letter or cancel. ``report`` (what the attempt spent) and the failed
    validation rule, if any, are written on the attempt row in the same transaction."""
    lease = _check_lease(lease)
    if not isinstance(error, BaseException):
        raise InvalidInputError("error", "must be an exception")
    if not isinstance(policy, RetryPolicy):
        raise InvalidInputError("policy", "must be a RetryPolicy")
    report = _check_report(report)
    now = clock.now()
    error_class, code = classify(error)
    decision = policy.decide(
        error_class, code, attempt=lease.attempt, max_attempts=lease.max_attempts,
        now=now, deadline_at=lease.deadline_at, rng=rng or random.Random(), not_before=not_before(error, now),
    )
    rule = _failed_rule(error)
    with transaction.atomic():
        if isinstance(decision, Retry):
            landed = _finish(lease.job_id, lease.fence, JobStatus.QUEUED, now, attempt_code=code, last_error=code,
                             report=report, rule=rule, visible_at=decision.visible_at)
        elif isinstance(decision, DeadLetterDecision):
            landed = _finish(lease.job_id, lease.fence, JobStatus.DEAD_LETTERED, now, attempt_code=code,
                             last_error=code, report=report, rule=rule, dead_letter=decision.reason)
        else:
            assert isinstance(decision, Cancel)
            landed = _finish(lease.job_id, lease.fence, JobStatus.CANCELLED, now, attempt_code=code,
                             last_error=decision.code, report=report, rule=rule)
        if not landed:
            raise StaleLeaseError(lease.job_id, lease.fence)
    return decision


def _failed_rule(error: BaseException) -> str:
    return ValidationRule(error.rule).value if isinstance(error, ValidationFailed) else ""


def release(lease: Lease, *, code: ErrorCode = ErrorCode.SHUTDOWN, clock: Clock = system_clock) -> None:
    """Give a leased job back without counting the attempt (the worker stops, or the database failed
    it: the job did nothing wrong).

    The attempt row is closed with ``code``; the job is claimable again at once, in its old place in line.
    """
    lease = _check_lease(lease)
    now = clock.now()
    with transaction.atomic():
        landed = _move(_held(lease.job_id, lease.fence), JobStatus.QUEUED, lease_until=None,
                       attempt=F("attempt") - 1)
        if not landed:
            raise StaleLeaseError(lease.job_id, lease.fence)
        _end_attempt(lease.job_id, lease.fence, now, code)
        wakeups.ring(wakeups.JOBS)
    log.info("job.released", **job_fields(lease, "released", code=str(code)))


def cancel(job_id: int, *, clock: Clock = system_clock) -> JobStatus | None:
    """End a live job as ``cancelled`` (an operator's decision): returns the status it left, or None
    when it was not live (finished meanwhile, or no such job) and nothing changed.

    A leased job's lease ends with it: its attempt row is closed as ``cancelled`` and the holder is
    fenced out. Every write of a lease holder (heartbeat, nack, release, the commit of its result) is
    guarded by its fence *and* ``status = 'leased'``; ``cancelled`` is terminal, so that guard can never
    hold again for any fence of this job and the holder's late commit raises StaleLeaseError, writing
    nothing (the worker reports ``lease_lost``). The fence itself is not grown: a fence number is a
    lease, one attempt row each (``check_invariants``: fences_contiguous), and a cancel is no lease.
    Callers may hold the transaction (with the audit entry); the row is locked until it ends.
    """
    check_int("job_id", job_id, low=1)
    now = clock.now()
    with transaction.atomic():
        row = Job.objects.select_for_update().filter(pk=job_id).values("status", "fence").first()
        if row is None or row["status"] not in (JobStatus.QUEUED, JobStatus.LEASED):
            return None
        was = JobStatus(row["status"])
        current = Job.objects.filter(pk=job_id, status=was, fence=row["fence"])
        if not _move(current, JobStatus.CANCELLED, finished_at=now, lease_until=None,
                     last_error_code=ErrorCode.CANCELLED):
            return None
        if was == JobStatus.LEASED:
            _end_attempt(job_id, row["fence"], now, ErrorCode.CANCELLED)
    return was


def run_now(job_id: int, *, clock: Clock = system_clock) -> bool:
    """Make a delayed queued job (a retry waiting out its backoff) claimable now, and ring the doorbell.

    Its place in line becomes now (``visible_at``). Returns False, changing nothing, when the job is
    not queued with a ``visible_at`` in the future and an attempt left. Callers may hold the transaction.
    """
    check_int("job_id", job_id, low=1)
    now = clock.now()
    with transaction.atomic():
        landed = Job.objects.filter(
            pk=job_id, status=JobStatus.QUEUED, visible_at__gt=now, attempt__lt=F("max_attempts")
        ).update(visible_at=now)
        if landed:
            wakeups.ring(wakeups.JOBS)
    return bool(landed)


def leases_held_by(worker_id: str) -> list[Lease]:
    """The leases ``worker_id`` holds now (a stopping worker releases them)."""
    rows = Job.objects.filter(status=JobStatus.LEASED, lease_owner=worker_id).values(*LEASE_FIELDS)
    return [Lease.from_row(row) for row in rows]


def release_held(worker_id: str, *, code: ErrorCode, keep: int | None = None) -> list[int]:
    """Give back, uncounted (``release``), every lease ``worker_id`` holds but the one of job ``keep``;
    returns the jobs released (a lease lost meanwhile is skipped)."""
    released = []
    for lease in leases_held_by(worker_id):
        if lease.job_id == keep:
            continue
        try:
            release(lease, code=code)
        except StaleLeaseError:
            continue
        released.append(lease.job_id)
    return released


@dataclass(frozen=True)
class ExpiryReport:
    dead_lettered: int
    cancelled: int


def expire_exhausted(now: dt.datetime, *, limit: int = 500) -> ExpiryReport:
    """End jobs whose lease expired once more than their budget of expiries allows (their document
    crashes or stalls every worker): dead-lettered as ``lease_expiries_exceeded`` with ``lease_expired``,
    or cancelled when past their deadline.

    Expired leases with expiries left need nothing: the claim takes them over with a new fence.
    """
    check_int("limit", limit, low=1, high=10_000)
    dead = cancelled = 0
    with transaction.atomic():
        exhausted = (
            Job.objects.select_for_update(skip_locked=True)
            .filter(status=JobStatus.LEASED, lease_until__lt=now, lease_expiries__gte=F("max_lease_expiries"))
            .values_list("id", "fence", "deadline_at", "tenant", "idempotency_key", "attempt")[:limit]
        )
        for job_id, fence, deadline_at, tenant, key, attempt in exhausted:
            if deadline_at <= now:
                ended = _finish(job_id, fence, JobStatus.CANCELLED, now, attempt_code=ErrorCode.LEASE_EXPIRED,
                                last_error=ErrorCode.DEADLINE_EXCEEDED)
                cancelled += ended
            else:
                ended = _finish(job_id, fence, JobStatus.DEAD_LETTERED, now, attempt_code=ErrorCode.LEASE_EXPIRED,
                                last_error=ErrorCode.LEASE_EXPIRED,
                                dead_letter=DeadLetterReason.LEASE_EXPIRIES_EXCEEDED)
                dead += ended
            if ended:
                log.warning("job.lease_expiries_exceeded", tenant=tenant, job_id=job_id, idempotency_key=key,
                            fence=fence, attempt=attempt,
                            outcome=JobStatus.CANCELLED if deadline_at <= now else JobStatus.DEAD_LETTERED)
    return ExpiryReport(dead_lettered=dead, cancelled=cancelled)
