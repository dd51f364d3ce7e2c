"""Deciding a review: approve, reject (with a reason) or correct (then approve), once, on the record.

One transaction holds the whole decision: the review's pending -> decided guard
(``pipeline.reviews.decide_review``, the one writer of the review row), the ``ReviewDecision`` row,
the audit entry (``dlq.audit.record``) and, for an approval or a correction, the ``review.decided``
outbox event with the final field values. Either all of it lands or none of it.

A decision is final: deciding a decided review raises AlreadyDecidedError and writes nothing. A review
outside the user's tenants is NoSuchReviewError, like one that does not exist. The stored result is
never changed: a correction keeps its final values and its diff on the decision row.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from dlq import audit
from dlq.models import AuditAction
from pipeline import outbox
from pipeline.clock import Clock, system_clock
from pipeline.models import Result, Review, ReviewStatus
from pipeline.reviews import decide_review
from relayops.validation import check_int
from review.errors import AlreadyDecidedError, InvalidInputError, NoSuchReviewError, NotAllowedError
from review.fields import Change, correct
from review.models import Decision, ReviewDecision
from tenancy.services import scope

DECIDE_PERMISSION = "pipeline.decide_review"
CONTENT_PERMISSION = "review.view_document_content"
AUDIT_ACTIONS = {Decision.APPROVE: AuditAction.APPROVE, Decision.REJECT: AuditAction.REJECT,
                 Decision.CORRECT: AuditAction.CORRECT}


def _user(user: object) -> AbstractBaseUser:
    if not isinstance(user, AbstractBaseUser) or not user.is_authenticated or user.pk is None:
        raise InvalidInputError("decided_by", "must be a saved, authenticated user")
    return user


def _allowed(user: Any) -> None:
    """Deciding needs the decide permission and the content permission: one decides what one has seen."""
    if not user.has_perm(DECIDE_PERMISSION) or not user.has_perm(CONTENT_PERMISSION):
        raise NotAllowedError()


def decide(
    review_id: int, decision: Decision | str, user: object, *, reason: str = "",
    values: dict[str, str] | None = None, clock: Clock = system_clock,
) -> ReviewDecision:
    """Record ``user``'s decision on review ``review_id`` (see the module docstring).

    ``reason`` is required to reject (and kept for the others when given); ``values`` (field path ->
    text) are the reviewer's values for a correction, checked by ``review.fields.correct``.
    """
    check_int("review_id", review_id)
    if decision not in Decision.values:
        raise InvalidInputError("decision", f"must be one of {Decision.values}")
    decision = Decision(decision)
    decider = _user(user)
    _allowed(decider)
    reason = audit.check_reason(reason)
    if decision == Decision.REJECT and not reason:
        raise InvalidInputError("reason", "a reason is required to reject")
    if decision != Decision.CORRECT and values:
        raise InvalidInputError("values", "only a correction carries field values")
    now = clock.now()
    with transaction.atomic():
        review = (scope(Review.objects.select_for_update(of=("self",)), decider)
                  .select_related("job").defer("job__payload").filter(pk=review_id).first())
        if review is None:
            raise NoSuchReviewError()
        if review.status != ReviewStatus.PENDING:
            raise AlreadyDecidedError()
        extracted = Result.objects.filter(job_id=review.job_id).values_list("data", flat=True).first()
        corrected: dict[str, Any] | None = None
        changes: list[Change] = []
        if decision == Decision.CORRECT:
            corrected, changes = correct(extracted, values or {})
        status = ReviewStatus.REJECTED if decision == Decision.REJECT else ReviewStatus.APPROVED
        if not decide_review(review.pk, status, decider, clock=clock):
            raise AlreadyDecidedError()  # the row lock makes this unreachable; the guard stays the guard
        row = ReviewDecision.objects.create(
            review=review, tenant=review.tenant, decision=decision, corrected=corrected,
            diff=[change.as_json() for change in changes], reason=reason, decided_by_id=decider.pk, decided_at=now,
        )
        detail = ("corrected: " + ", ".join(row.corrected_fields)) if changes else ""
        audit.record(AUDIT_ACTIONS[decision], at=now, tenant=review.tenant, operator=decider, reason=reason,
                     job=review.job, review=review, detail=detail)
        if row.final:
            outbox.emit(review.tenant, outbox.REVIEW_DECIDED_TOPIC, review.idempotency_key,
                        decided_event(review, row, corrected if corrected is not None else extracted), clock=clock)
    return row


def decided_event(review: Review, row: ReviewDecision, fields: Any) -> dict[str, Any]:
    """The ``review.decided`` event's payload: which document, which decision, the final field values."""
    return {
        "review_id": review.pk, "job_id": review.job_id, "tenant": review.tenant,
        "document_id": review.document_id, "idempotency_key": review.idempotency_key,
        "operation_version": review.job.operation_version, "decision": str(row.decision),
        "decided_at": row.decided_at.isoformat(), "corrected_fields": row.corrected_fields, "fields": fields,
    }
