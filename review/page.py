"""What the review page shows, read in a fixed number of queries whatever the invoice's length or the
document's number of versions: the document text, the extracted fields laid out as an invoice, the
validation rules, the attempt that produced the result (extractor, model, spend), the change from the
previous version's result, and the decision once made. Also the reviewer's queue: the next pending
review, oldest first.

Content is read here and shown only on the review page: never logged, never put in a list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from pipeline.models import Attempt, Job, Result, Review, ReviewStatus
from review.fields import Change, InvoiceLayout, RuleCheck, diff, layout, rule_checks
from review.models import ReviewDecision
from tenancy.services import scope


@dataclass(frozen=True)
class Previous:
    """The version before this one: its result (None when it has none) and, if it failed, why."""

    job: Job
    has_result: bool
    changes: list[Change]
    dead_letter_reason: str = ""
    failed_rule: str = ""


@dataclass(frozen=True)
class ReviewPage:
    review: Review
    job: Job
    text: str | None
    fields: Any  # the extractor's stored result, as stored
    rules: list[RuleCheck] | None
    attempt: Attempt | None
    versions: int
    previous: Previous | None
    decision: ReviewDecision | None

    @property
    def pending(self) -> bool:
        return self.review.status == ReviewStatus.PENDING

    def invoice(self, values: dict[str, str] | None = None, errors: dict[str, str] | None = None) -> InvoiceLayout:
        """The fields laid out as an invoice, with a reviewer's values and their errors when given."""
        return layout(self.fields, values, errors)

    @property
    def corrections(self) -> list[Change]:
        """What the decision's reviewer changed, field by field (a correction's diff)."""
        diff = self.decision.diff if self.decision is not None else []
        return [Change(c["field"], c.get("extracted"), c.get("corrected")) for c in diff or []]

    @property
    def broken_rules(self) -> list[str]:
        return [check.rule for check in self.rules or [] if not check.holds]


def _text(payload: Any) -> str | None:
    text = payload.get("text") if isinstance(payload, dict) else None
    return text if isinstance(text, str) else None


def _previous(job: Job) -> tuple[int, Previous | None, Any]:
    """How many versions the document has, and the one before ``job`` with its result (two queries)."""
    versions = Job.objects.filter(tenant=job.tenant, document_id=job.document_id)
    count = versions.count()
    earlier = (versions.filter(operation_version__lt=job.operation_version).order_by("-operation_version")
               .select_related("result", "dead_letter").defer("payload").first())
    if earlier is None:
        return count, None, None
    result = getattr(earlier, "result", None)
    dead = getattr(earlier, "dead_letter", None)
    return count, Previous(
        job=earlier, has_result=result is not None, changes=[],
        dead_letter_reason=dead.reason_code if dead else "", failed_rule=dead.failed_rule if dead else "",
    ), (result.data if result is not None else None)


def load(review: Review) -> ReviewPage:
    """The page of ``review`` (its job selected with it), whose tenant the caller checked."""
    job = review.job
    result = Result.objects.filter(job_id=job.pk).first()
    fields = result.data if result is not None else None
    attempt = (Attempt.objects.filter(job_id=job.pk, fence=result.fence).first() if result is not None else None)
    versions, previous, earlier_fields = _previous(job)
    if previous is not None and previous.has_result:
        previous = Previous(job=previous.job, has_result=True, changes=diff(earlier_fields, fields))
    decision = ReviewDecision.objects.filter(review_id=review.pk).select_related("decided_by").first()
    return ReviewPage(
        review=review, job=job, text=_text(job.payload), fields=fields,
        rules=rule_checks(fields) if fields is not None else None, attempt=attempt, versions=versions,
        previous=previous, decision=decision,
    )


def reviews_of(user: Any) -> QuerySet[Review]:
    """The reviews ``user`` may open: those of their tenants."""
    return scope(Review.objects.all(), user)


def next_pending(user: Any, after: Review | None = None) -> Review | None:
    """The reviewer's next pending review, oldest handoff first: the first after ``after`` in that order,
    else the oldest other one (the queue wraps); None when nothing else is pending."""
    pending = reviews_of(user).filter(status=ReviewStatus.PENDING).order_by("created_at", "id").only("id")
    if after is None:
        return pending.first()
    later = pending.filter(Q(created_at__gt=after.created_at) | Q(created_at=after.created_at, id__gt=after.pk))
    return later.first() or pending.exclude(pk=after.pk).first()
