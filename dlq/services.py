"""DLQ services: the audited reprocess of a dead letter as a new version."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from dlq.models import AuditAction, AuditEntry
from dlq.ratelimit import check_reprocess_allowed, record_refusal
from pipeline import queue
from pipeline.clock import Clock, system_clock
from pipeline.errors import InvalidInputError, NotReprocessableError, ReprocessRateLimitedError
from pipeline.models import DeadLetter, Job
from pipeline.states import JobStatus
from relayops.validation import check_int

MAX_REASON_LENGTH = 500


@dataclass(frozen=True)
class ReprocessOutcome:
    new_job: Job
    audit_entry: AuditEntry
    created: bool  # False: this dead letter was reprocessed before; the first new job is returned


def _operator_identity(operator: object) -> tuple[str, AbstractBaseUser | None]:
    """An operator is an authenticated user or a non-empty identity string (scripts, commands)."""
    if isinstance(operator, AbstractBaseUser) and operator.is_authenticated and operator.pk is not None:
        return operator.get_username(), operator
    if isinstance(operator, str) and operator.strip() and len(operator) <= 150 and operator.isprintable():
        return operator.strip(), None
    raise InvalidInputError("operator", "an operator identity (a user or a non-empty name) is required")


def reprocess_from_dlq(
    dead_letter_id: int, operator: object, *, reason: str = "", clock: Clock = system_clock
) -> ReprocessOutcome:
    """Create the dead job's next version (``operation_version + 1``) and its audit entry, together.

    The dead job is never revived. A second reprocess of the same dead letter returns the first new
    job. Refused (NotReprocessableError) when the dead letter does not exist; cancelled jobs never
    have one. Refused (ReprocessRateLimitedError) past the tenant's reprocess limit; the refusal
    is recorded as a ReprocessRefusal.
    """
    name, user = _operator_identity(operator)
    check_int("dead_letter_id", dead_letter_id)
    if not isinstance(reason, str) or len(reason) > MAX_REASON_LENGTH or "\x00" in reason:
        raise InvalidInputError("reason", f"must be a string of at most {MAX_REASON_LENGTH} characters")
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
        if previous is not None:
            return ReprocessOutcome(previous.new_job, previous, created=False)
        old = dead.job
        if old.status != JobStatus.DEAD_LETTERED:
            raise NotReprocessableError(f"job {old.pk} is {old.status}, not dead-lettered")
        now = clock.now()
        check_reprocess_allowed(old.tenant, now, operator=name)
        new_job, _ = queue.enqueue(
            old.tenant, old.document_id, old.operation_version + 1, old.payload,
            max_attempts=old.max_attempts, deadline=old.deadline_at - old.created_at,
            reprocessed_from=old, clock=clock,
        )
        entry = AuditEntry.objects.create(
            at=now, action=AuditAction.REPROCESS, tenant=old.tenant, operator=name,
            operator_user_id=user.pk if user else None, reason=reason.strip(), dead_letter=dead,
            old_job=old, new_job=new_job,
        )
    return ReprocessOutcome(new_job, entry, created=True)
