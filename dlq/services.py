"""DLQ services: the audited reprocess of a dead letter as a new version, one row or a batch.

The admin's action, commands and any API share them: a batch reports each row's outcome, each row in
its own transaction, and the audit holds an entry only for a reprocess that created a job.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from dlq import audit
from dlq.audit import check_reason, operator_identity
from dlq.errors import NextVersionExistsError
from dlq.models import AuditAction, AuditEntry
from dlq.ratelimit import check_reprocess_allowed, record_refusal
from pipeline import queue
from pipeline.clock import Clock, system_clock
from pipeline.errors import IdempotencyConflictError, InvalidInputError, NotReprocessableError
from pipeline.errors import ReprocessRateLimitedError
from pipeline.idempotency import MAX_OPERATION_VERSION
from pipeline.models import DeadLetter, Job
from pipeline.states import JobStatus
from relayops.validation import check_int

MAX_REASON_LENGTH = audit.MAX_REASON


@dataclass(frozen=True)
class ReprocessOutcome:
    new_job: Job
    audit_entry: AuditEntry
    created: bool  # False: this dead letter was reprocessed before; the first new job is returned


def reprocess_from_dlq(
    dead_letter_id: int, operator: object, *, reason: str = "", clock: Clock = system_clock
) -> ReprocessOutcome:
    """Create the dead job's next version (``operation_version + 1``) and its audit entry, together.

    The dead job is never revived. A second reprocess of the same dead letter returns the first new
    job. Refused, writing nothing, with NotReprocessableError when the dead letter does not exist or
    the version cannot grow, and with its subclass NextVersionExistsError when that version exists
    already (enqueued by a client, or by a reprocess of another version): the audit never claims a
    job it did not create, and the rate limit is not spent. Refused with ReprocessRateLimitedError
    past the tenant's reprocess limit; the refusal is recorded as a ReprocessRefusal.
    """
    name, user = operator_identity(operator)
    check_int("dead_letter_id", dead_letter_id)
    reason = check_reason(reason)
    try:
        return _reprocess(dead_letter_id, name, user, reason, clock)
    except ReprocessRateLimitedError as refused:
        # The refused work rolled back; the refusal is counted after it, so it stays visible.
        record_refusal(refused, dead_letter_id=dead_letter_id, operator=name, now=clock.now())
        raise


def _reprocess(
    dead_letter_id: int, name: str, user: AbstractBaseUser | None, reason: str, clock: Clock
) -> ReprocessOutcome:
    with transaction.atomic():
        dead = DeadLetter.objects.select_for_update().select_related("job").filter(pk=dead_letter_id).first()
        if dead is None:
            raise NotReprocessableError(f"dead letter {dead_letter_id} does not exist")
        previous = AuditEntry.objects.select_related("new_job").filter(dead_letter=dead).first()
        if previous is not None and previous.new_job is not None:  # a reprocess entry always names it
            return ReprocessOutcome(previous.new_job, previous, created=False)
        old = dead.job
        if old.status != JobStatus.DEAD_LETTERED:
            raise NotReprocessableError(f"job {old.pk} is {old.status}, not dead-lettered")
        if old.operation_version >= MAX_OPERATION_VERSION:
            raise NotReprocessableError(f"{old.idempotency_key} is the last version a document may have")
        _refuse_existing_next_version(old)  # before the limit: a refusal spends nothing
        check_reprocess_allowed(old.tenant, clock.now(), operator=name)
        new_job = _enqueue_next_version(old, clock)
        entry = audit.record(
            AuditAction.REPROCESS, at=clock.now(), tenant=old.tenant, operator=user or name, reason=reason,
            dead_letter=dead, old_job=old, new_job=new_job, job=old,
        )
    return ReprocessOutcome(new_job, entry, created=True)


def _refuse_existing_next_version(old: Job) -> None:
    existing = Job.objects.defer("payload").filter(
        tenant=old.tenant, document_id=old.document_id, operation_version=old.operation_version + 1
    ).first()
    if existing is not None:
        raise NextVersionExistsError(existing, same_payload=existing.payload_hash == old.payload_hash)


def _enqueue_next_version(old: Job, clock: Clock) -> Job:
    """The next version, created now; a client that enqueued it a moment ago makes it a refusal."""
    version = old.operation_version + 1
    try:
        new_job, created = queue.enqueue(
            old.tenant, old.document_id, version, old.payload, max_attempts=old.max_attempts,
            deadline=old.deadline_at - old.created_at, reprocessed_from=old, clock=clock,
        )
    except IdempotencyConflictError:
        raise NextVersionExistsError(_version(old, version), same_payload=False) from None
    if not created:
        raise NextVersionExistsError(new_job, same_payload=True)
    return new_job


def _version(old: Job, version: int) -> Job:
    return Job.objects.defer("payload").get(tenant=old.tenant, document_id=old.document_id, operation_version=version)


class RowResult(enum.StrEnum):
    """What a reprocess did to one dead letter of a batch."""

    REPROCESSED = "reprocessed"  # a new version was created and audited
    ALREADY_REPROCESSED = "already_reprocessed"  # an earlier reprocess made its new version; nothing new
    VERSION_EXISTS = "version_exists"  # the next version exists with the same document; nothing new
    CONFLICT = "conflict"  # the next version exists with another document; nothing done
    RATE_LIMITED = "rate_limited"  # the tenant's limit refused it (recorded as a ReprocessRefusal)
    NOT_REPROCESSABLE = "not_reprocessable"  # gone, not dead-lettered, or at the last version


@dataclass(frozen=True)
class RowOutcome:
    dead_letter_id: int
    tenant: str
    result: RowResult
    job: Job | None = None  # the new version, or the existing one a refusal names
    detail: str = ""  # why it was refused, for the operator
    retry_after_seconds: int | None = None  # RATE_LIMITED: when one more fits


def reprocess_many(
    dead_letter_ids: Iterable[int], operator: object, *, reason: str = "", clock: Clock = system_clock
) -> list[RowOutcome]:
    """Reprocess each dead letter in its own transaction and say what happened to each, in order.

    A refused row (conflict, rate limit, not reprocessable) never stops the others and never leaves
    anything half-written; the audit and the rate limit count only the rows that created a job.
    Bad arguments (operator, reason, an id that is not an integer) raise InvalidInputError before
    any row is tried.
    """
    operator_identity(operator)
    check_reason(reason)
    ids = [check_int("dead_letter_id", dead_letter_id) for dead_letter_id in dead_letter_ids]
    tenants = dict(DeadLetter.objects.filter(pk__in=ids).values_list("pk", "tenant"))
    return [reprocess_one(dead_letter_id, tenants.get(dead_letter_id, ""), operator, reason, clock)
            for dead_letter_id in ids]


def reprocess_one(dead_letter_id: int, tenant: str, operator: object, reason: str, clock: Clock) -> RowOutcome:
    """One row of a batch: its outcome, whatever happened (a refusal is an outcome, not an exception)."""
    try:
        outcome = reprocess_from_dlq(dead_letter_id, operator, reason=reason, clock=clock)
    except NextVersionExistsError as exists:
        result = RowResult.VERSION_EXISTS if exists.same_payload else RowResult.CONFLICT
        return RowOutcome(dead_letter_id, tenant, result, exists.job, str(exists))
    except ReprocessRateLimitedError as limited:
        return RowOutcome(dead_letter_id, tenant, RowResult.RATE_LIMITED, detail=str(limited),
                          retry_after_seconds=limited.retry_after_seconds)
    except (NotReprocessableError, InvalidInputError) as refused:
        return RowOutcome(dead_letter_id, tenant, RowResult.NOT_REPROCESSABLE, detail=str(refused))
    result = RowResult.REPROCESSED if outcome.created else RowResult.ALREADY_REPROCESSED
    return RowOutcome(dead_letter_id, tenant, result, outcome.new_job)
