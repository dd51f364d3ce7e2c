"""Review decisions: an operator approves or rejects a pending review handoff, once.

This is the one writer of a review's status. The review page decides through ``review.decisions``,
which calls ``decide_review`` inside the transaction that also writes the decision, its audit entry and
its outbox event.

The handoff time (``created_at``) and the decision time (``decided_at``) both stay on the row, so the
wait from handoff to decision is kept (``with_wait``).
"""

from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import DurationField, ExpressionWrapper, F, QuerySet

from pipeline.clock import Clock, system_clock
from pipeline.errors import InvalidInputError
from pipeline.models import Review, ReviewStatus
from relayops.logging import get_logger
from relayops.validation import check_int

log = get_logger(__name__)

DECISIONS = (ReviewStatus.APPROVED, ReviewStatus.REJECTED)


def decide_review(
    review_id: int, decision: ReviewStatus | str, decided_by: object, *, clock: Clock = system_clock
) -> bool:
    """Approve or reject a review. Guard: the review is still pending.

    Returns False when the review was already decided (or does not exist): nothing is written, and
    the first decision stands.
    """
    if decision not in DECISIONS:
        raise InvalidInputError("decision", f"must be one of {[str(d) for d in DECISIONS]}")
    if not isinstance(decided_by, AbstractBaseUser) or not decided_by.is_authenticated or decided_by.pk is None:
        raise InvalidInputError("decided_by", "must be a saved, authenticated user")
    check_int("review_id", review_id)
    landed = Review.objects.filter(pk=review_id, status=ReviewStatus.PENDING).update(
        status=ReviewStatus(decision), decided_at=clock.now(), decided_by_id=decided_by.pk
    )
    if landed:
        _log_decision(review_id)
    return bool(landed)


def _log_decision(review_id: int) -> None:
    """The decision's log line: review wait (handoff to decision) and end to end (ingest to decision)."""
    row = Review.objects.filter(pk=review_id).values(
        "tenant", "job_id", "idempotency_key", "status", "created_at", "decided_at", "job__created_at", "job__fence",
        "job__attempt").first()
    decided = row["decided_at"] if row is not None else None
    if row is None or decided is None:
        return
    log.info("review.decided", tenant=row["tenant"], job_id=row["job_id"], review_id=review_id,
             idempotency_key=row["idempotency_key"], fence=row["job__fence"], attempt=row["job__attempt"],
             outcome=row["status"], review_wait_seconds=round((decided - row["created_at"]).total_seconds(), 6),
             end_to_end_seconds=round((decided - row["job__created_at"]).total_seconds(), 6))


def with_wait(reviews: QuerySet[Review]) -> QuerySet[Review]:
    """Annotate ``wait``: decided_at - created_at (None while pending)."""
    return reviews.annotate(wait=ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField()))
