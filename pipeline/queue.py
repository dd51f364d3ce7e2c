"""The queue service: enqueue, lease, heartbeat, ack, nack, release. The only code that moves a job.

Every transition is one guarded write (``WHERE id = … AND fence = … AND status = 'leased'``) that
reports whether it landed; a lease whose fence is not current raises StaleLeaseError and changes
nothing.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from pipeline import doorbell, sql
from pipeline.clock import Clock, system_clock
from pipeline.errors import IdempotencyConflictError, InvalidInputError, StaleLeaseError
from pipeline.idempotency import build_idempotency_key, canonical_json, payload_hash
from pipeline.models import Attempt, Job
from pipeline.reasons import ErrorCode
from pipeline.retry import DEFAULT_POLICY, Cancel, DeadLetter, Decision, Retry, RetryPolicy, classify
from pipeline.states import JobStatus

DEFAULT_DEADLINE = dt.timedelta(hours=1)
MAX_ATTEMPTS_LIMIT = 100
MAX_OPERATION_VERSION = 2**31 - 1  # Job.operation_version is an integer column
MAX_KEY_LENGTH = 300  # Job.idempotency_key


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


def lease_seconds_or_default(value: float | None) -> float:
    """``value``, or the configured lease length when None; InvalidInputError outside (0, 86400]."""
    seconds = settings.RELAYOPS["LEASE_SECONDS"] if value is None else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 86400:
        raise InvalidInputError("lease_seconds", "must be a number in (0, 86400]")
    return float(seconds)


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


def _max_attempts(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise InvalidInputError("max_attempts", f"must be an int in [1, {MAX_ATTEMPTS_LIMIT}]")
    return value


def enqueue(
    tenant_id: str,
    document_id: str,
    operation_version: int,
    payload: Any,
    *,
    max_attempts: int = 3,
    deadline: dt.datetime | dt.timedelta | None = None,
    reprocessed_from: Job | None = None,
    clock: Clock = system_clock,
) -> tuple[Job, bool]:
    """Create the job for ``tenant:document:vN`` and ring the doorbell, in one transaction.

    Same key and same payload returns the existing job and ``created=False``; same key and another
    payload raises IdempotencyConflictError. Nothing is written in either case.
    """
    key = build_idempotency_key(tenant_id, document_id, operation_version)
    if operation_version > MAX_OPERATION_VERSION:
        raise InvalidInputError("operation_version", f"must be at most {MAX_OPERATION_VERSION}")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInputError("idempotency_key", f"{key[:40]}... is longer than {MAX_KEY_LENGTH} characters")
    canonical_json(payload)
    digest = payload_hash(payload)
    attempts = _max_attempts(max_attempts)
    now = clock.now()
    deadline_at = _deadline(deadline, now)
    existing = Job.objects.filter(idempotency_key=key).first()
    if existing is None:
        try:
            with transaction.atomic():
                job = Job.objects.create(
                    tenant=tenant_id, document_id=document_id, operation_version=operation_version,
                    idempotency_key=key, payload=payload, payload_hash=digest, max_attempts=attempts,
                    created_at=now, visible_at=now, deadline_at=deadline_at, reprocessed_from=reprocessed_from,
                )
                doorbell.ring(doorbell.JOBS)
            return job, True
        except IntegrityError:
            existing = Job.objects.filter(idempotency_key=key).first()
            if existing is None:
                raise
    if existing.payload_hash != digest:
        raise IdempotencyConflictError(key)
    return existing, False


def lease_next(worker_id: str, *, lease_seconds: float | None = None, clock: Clock = system_clock) -> Lease | None:
    """Lease the oldest claimable job (visible and queued, or its lease expired), or return None.

    One statement with FOR UPDATE SKIP LOCKED: concurrent workers never hold the same job, and the
    fence grows on every lease. A job found past its deadline is cancelled instead, and the next one
    is tried.
    """
    if not isinstance(worker_id, str) or not worker_id or len(worker_id) > 200 or not worker_id.isprintable():
        raise InvalidInputError("worker_id", "must be a non-empty printable string of at most 200 characters")
    seconds = lease_seconds_or_default(lease_seconds)
    while True:
        now = clock.now()
        lease_until = now + dt.timedelta(seconds=seconds)
        rows = sql.fetch(
            sql.CLAIM_JOBS.format(skip_locked=sql.skip_locked()),
            {"now": sql.ts(now), "worker": worker_id, "lease_until": sql.ts(lease_until), "limit": 1},
        )
        if not rows:
            return None
        row = rows[0]
        if row["status"] == JobStatus.CANCELLED:
            continue  # cancelled past its deadline; recorded on the job row, try the next one
        return Lease(
            job_id=row["id"], fence=row["fence"], lease_until=lease_until, worker_id=worker_id,
            attempt=row["attempt"], max_attempts=row["max_attempts"], tenant=row["tenant"],
            document_id=row["document_id"], operation_version=row["operation_version"],
            idempotency_key=row["idempotency_key"], payload=sql.read_json(row["payload"]),
            payload_hash=row["payload_hash"], deadline_at=sql.read_ts(row["deadline_at"]),
        )


def _check_lease(lease: object) -> Lease:
    if not isinstance(lease, Lease):
        raise InvalidInputError("lease", "must be a Lease returned by lease_next")
    return lease


def _held(lease: Lease):
    """The guard of every lease holder's write: this job, this fence, still leased."""
    return Job.objects.filter(pk=lease.job_id, fence=lease.fence, status=JobStatus.LEASED)


def heartbeat(lease: Lease, *, lease_seconds: float | None = None, clock: Clock = system_clock) -> Lease:
    """Extend a current lease; returns the lease with its new expiry."""
    lease = _check_lease(lease)
    lease_until = clock.now() + dt.timedelta(seconds=lease_seconds_or_default(lease_seconds))
    if not _held(lease).update(lease_until=lease_until, visible_at=lease_until):
        raise StaleLeaseError(lease.job_id, lease.fence)
    return Lease(**{**lease.__dict__, "lease_until": lease_until})


def complete(lease: Lease, now: dt.datetime) -> None:
    """Mark the leased job succeeded, or raise StaleLeaseError. Callers own the transaction."""
    if not _held(lease).update(status=JobStatus.SUCCEEDED, finished_at=now, lease_until=None):
        raise StaleLeaseError(lease.job_id, lease.fence)


def ack(lease: Lease, *, clock: Clock = system_clock) -> None:
    """Complete a job that produces no result. Jobs with a result use commit_result_with_event."""
    complete(_check_lease(lease), clock.now())


def _end_attempt(lease: Lease, now: dt.datetime, code: ErrorCode) -> None:
    Attempt.objects.filter(job_id=lease.job_id, fence=lease.fence).update(ended_at=now, error_code=code)


def nack(
    lease: Lease,
    error: BaseException,
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    clock: Clock = system_clock,
    rng: random.Random | None = None,
) -> Decision:
    """Record a failed attempt and apply the policy's one decision: retry, dead-letter or cancel."""
    from dlq.services import dead_letter_job

    lease = _check_lease(lease)
    if not isinstance(error, BaseException):
        raise InvalidInputError("error", "must be an exception")
    if not isinstance(policy, RetryPolicy):
        raise InvalidInputError("policy", "must be a RetryPolicy")
    now = clock.now()
    error_class, code = classify(error)
    decision = policy.decide(
        error_class, code, attempt=lease.attempt, max_attempts=lease.max_attempts,
        now=now, deadline_at=lease.deadline_at, rng=rng or random.Random(),
    )
    with transaction.atomic():
        if isinstance(decision, Retry):
            landed = _held(lease).update(
                status=JobStatus.QUEUED, visible_at=decision.visible_at, lease_until=None, last_error_code=code,
            )
        elif isinstance(decision, DeadLetter):
            landed = _held(lease).update(
                status=JobStatus.DEAD_LETTERED, finished_at=now, lease_until=None, last_error_code=code,
            )
            if landed:
                dead_letter_job(lease.job_id, decision.reason, code, now)
        else:
            assert isinstance(decision, Cancel)
            landed = _held(lease).update(
                status=JobStatus.CANCELLED, finished_at=now, lease_until=None, last_error_code=decision.code,
            )
        if not landed:
            raise StaleLeaseError(lease.job_id, lease.fence)
        _end_attempt(lease, now, code)
    return decision


def release(lease: Lease, *, clock: Clock = system_clock) -> None:
    """Give a leased job back without counting the attempt (graceful shutdown)."""
    lease = _check_lease(lease)
    now = clock.now()
    with transaction.atomic():
        landed = _held(lease).update(
            status=JobStatus.QUEUED, visible_at=now, lease_until=None, attempt=F("attempt") - 1,
        )
        if not landed:
            raise StaleLeaseError(lease.job_id, lease.fence)
        _end_attempt(lease, now, ErrorCode.SHUTDOWN)
        doorbell.ring(doorbell.JOBS)
