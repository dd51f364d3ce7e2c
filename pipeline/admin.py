"""The pipeline's admin: jobs, results, outbox events and reviews, read-only.

Lists select their related rows up front (the query count does not grow with the rows shown) and
never show payloads, results' data or events' payloads. Reviews are decided on the review page (the
``review`` app, through pipeline.reviews.decide_review); the review list links to it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from pipeline.models import PARKED, Attempt, DeadLetter, Job, OutboxEvent, Result, Review, ReviewStatus
from pipeline.reviews import with_wait
from pipeline.states import JobStatus
from tenancy.admin_base import AgeFilter, PipelineRowAdmin, TenantFilter, age_of, clipped_column
from tenancy.admin_base import format_duration, job_link, timeline_link
from tenancy.services import scope

JOB_FIELDS = (
    "idempotency_key", "tenant", "document_id", "operation_version", "status", "attempt", "max_attempts",
    "created_at", "visible_at", "leased_at", "lease_until", "deadline_at", "lease_owner", "fence",
    "last_error", "finished_at", "reprocessed_from", "payload_hash", "dead_letter_link", "review_link", "timeline",
    "spend",
)
CONTENT_PERMISSION = "review.view_document_content"  # the review page's: it shows document content
SEARCH_HELP = (
    "An exact idempotency key (tenant:document:vN), the start of a document id, or tenant:start of a document id."
)


@admin.register(Job)
class JobAdmin(PipelineRowAdmin):
    list_display = [
        "key", "tenant", "document", "version", "status", "attempts", "age", "lease_owner", "lease_until", "timeline",
    ]
    list_filter = [TenantFilter, "status", AgeFilter]
    search_fields = ["=idempotency_key", "document_id"]
    search_help_text = SEARCH_HELP
    exact_search_fields = ["idempotency_key"]
    document_field = "document_id"
    ordering = ["-id"]
    actions: list[str] | None = None
    fields = JOB_FIELDS
    readonly_fields = JOB_FIELDS

    key = clipped_column("idempotency_key", "idempotency key")

    document = clipped_column("document_id", "document id")

    @admin.display(description="last error")
    def last_error(self, job: Job) -> str:
        """The last failed attempt's code; on a succeeded job, the failure it recovered from."""
        if not job.last_error_code:
            return "-"
        if job.status == JobStatus.SUCCEEDED:
            return f"none (recovered from {job.last_error_code} on an earlier attempt)"
        return job.last_error_code

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        return super().get_queryset(request).defer("payload")

    @admin.display(description="version", ordering="operation_version")
    def version(self, job: Job) -> str:
        return f"v{job.operation_version}"

    @admin.display(description="attempt")
    def attempts(self, job: Job) -> str:
        return f"{job.attempt}/{job.max_attempts}"

    @admin.display(description="age", ordering="created_at")
    def age(self, job: Job) -> str:
        return age_of(job.created_at)

    @admin.display(description="timeline")
    def timeline(self, job: Job) -> str:
        return timeline_link(job.pk)

    @admin.display(description="dead letter")
    def dead_letter_link(self, job: Job) -> str:
        """The job's dead letter (a dead-lettered job has one), labelled with its reason."""
        return _row_link(DeadLetter.objects.filter(job_id=job.pk), "reason_code", "admin:pipeline_deadletter_change")

    @admin.display(description="review")
    def review_link(self, job: Job) -> str:
        """The job's review, labelled with its status."""
        return _row_link(Review.objects.filter(job_id=job.pk), "status", "admin:pipeline_review_change")

    @admin.display(description="attempts and spend")
    def spend(self, job: Job) -> str:
        """Each attempt's outcome and what its extraction spent: never the prompt, document or answer."""
        return attempt_spend_table(Attempt.objects.filter(job_id=job.pk).order_by("fence"))


def _or_dash(value: object) -> object:
    return "-" if value in (None, "") else value


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def attempt_spend_table(attempts: QuerySet[Attempt]) -> str:
    """Per attempt: its outcome, its three timings kept apart (queue wait, inference, commit) and what
    the extraction spent."""
    rows = format_html_join("", "<tr>" + "<td>{}</td>" * 12 + "</tr>", (
        (a.attempt, a.fence, a.error_code or ("running" if a.ended_at is None else "ok"), _or_dash(a.failed_rule),
         _seconds(a.queue_wait_seconds), _or_dash(a.extractor), _or_dash(a.model_name), _or_dash(a.input_tokens),
         _or_dash(a.output_tokens), _seconds(a.inference_seconds), _seconds(a.commit_seconds), _or_dash(a.cost))
        for a in attempts
    ))
    head = "".join(f"<th>{name}</th>" for name in (
        "attempt", "fence", "outcome", "failed rule", "queue wait", "extractor", "model", "input tokens",
        "output tokens", "inference", "commit", "cost"))
    return format_html('<table class="attempt-spend"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
                       mark_safe(head), rows) if rows else "-"


@admin.register(Result)
class ResultAdmin(PipelineRowAdmin):
    """Results are shown by key, fence and time; their extracted data is document content and is not."""

    list_display = ["key", "tenant", "version", "fence", "created_at", "timeline"]
    list_filter = [TenantFilter, AgeFilter]
    list_select_related = ["job"]
    search_fields = ["=idempotency_key"]
    exact_search_fields = ["idempotency_key"]
    ordering = ["-id"]
    actions = None
    fields = readonly_fields = ("idempotency_key", "tenant", "job", "fence", "payload_hash", "created_at", "timeline")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Result]:
        return super().get_queryset(request).defer("data", "job__payload")

    key = clipped_column("idempotency_key", "idempotency key")

    @admin.display(description="version")
    def version(self, result: Result) -> str:
        return job_link(result.job)

    @admin.display(description="timeline")
    def timeline(self, result: Result) -> str:
        return timeline_link(result.job_id)


class PublishedFilter(admin.SimpleListFilter):
    """Pending, parked or published: pending and published each served by a partial index; parked ones
    are among the pending."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("pending", "pending"), ("parked", "parked"), ("published", "published")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "parked":
            return queryset.filter(PARKED, published_at__isnull=True)
        if self.value() in ("pending", "published"):
            return queryset.filter(published_at__isnull=self.value() == "pending")
        return queryset


@admin.register(OutboxEvent)
class OutboxEventAdmin(PipelineRowAdmin):
    """Events and where their publication stands. A failed publication shows its failure count, its
    kind and the last HTTP status answered (never a response body); a parked one waits for an
    operator's redelivery (the action is added by the webhooks app, which records it in the audit)."""

    list_display = [
        "key", "tenant", "topic", "created_at", "published_at", "state", "failures", "last_failure_shown",
        "publish_attempts", "age",
    ]
    list_filter = [PublishedFilter, TenantFilter]
    search_fields = ["=idempotency_key"]
    exact_search_fields = ["idempotency_key"]
    ordering = ["-id"]
    actions: list[str] | None = None  # the webhooks app adds "redeliver" (it records the audit)
    fields = readonly_fields = (
        "event_id", "topic", "idempotency_key", "tenant", "created_at", "state", "published_at", "publish_attempts",
        "claimed_until", "failures", "last_failure_shown", "next_attempt_at", "parked_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[OutboxEvent]:
        return super().get_queryset(request).defer("payload")

    key = clipped_column("idempotency_key", "idempotency key")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        oldest = (
            scope(OutboxEvent.objects.unpublished(), request.user).order_by("id")
            .values_list("created_at", flat=True).first()
        )
        extra = {"oldest_pending_age": age_of(oldest) if oldest else None, **(extra_context or {})}
        return super().changelist_view(request, extra)

    @admin.display(description="age", ordering="created_at")
    def age(self, event: OutboxEvent) -> str:
        return age_of(event.created_at)

    @admin.display(description="state")
    def state(self, event: OutboxEvent) -> str:
        if event.published_at is not None:
            return "published"
        if event.parked:
            return "parked"
        return "retrying" if event.failures else "pending"

    @admin.display(description="last failure")
    def last_failure_shown(self, event: OutboxEvent) -> str:
        """The kind of the last failed publication and the HTTP status answered, if any."""
        if not event.last_failure:
            return "-"
        return f"{event.last_failure} (HTTP {event.last_status})" if event.last_status else event.last_failure


@admin.register(Review)
class ReviewAdmin(PipelineRowAdmin):
    """The review queue. Reviews are decided on the review page (the ``review`` app: the fields beside the
    document, approve, reject or correct, on the record), one at a time, never in bulk and unseen."""

    list_display = [
        "key", "tenant", "document", "version", "status", "created_at", "decided_at", "decided_by",
        "wait", "open", "timeline",
    ]
    list_filter = [TenantFilter, "status", AgeFilter]
    list_select_related = ["job", "decided_by"]
    search_fields = ["=idempotency_key", "document_id"]
    search_help_text = SEARCH_HELP
    exact_search_fields = ["idempotency_key"]
    document_field = "document_id"
    ordering = ["-id"]
    actions = None
    fields = readonly_fields = (
        "idempotency_key", "tenant", "document_id", "job", "event_id", "status", "created_at", "decided_at",
        "decided_by", "wait", "open", "timeline",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Review]:
        return with_wait(super().get_queryset(request).defer("job__payload"))

    key = clipped_column("idempotency_key", "idempotency key")

    document = clipped_column("document_id", "document id")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = {"content_visible": request.user.has_perm(CONTENT_PERMISSION), **(extra_context or {})}
        return super().changelist_view(request, extra)

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = list(super().get_list_display(request))
        return shown if request.user.has_perm(CONTENT_PERMISSION) else [name for name in shown if name != "open"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        shown = list(super().get_fields(request, obj))
        return shown if request.user.has_perm(CONTENT_PERMISSION) else [name for name in shown if name != "open"]

    @admin.display(description="version")
    def version(self, review: Review) -> str:
        return job_link(review.job)

    @admin.display(description="wait", ordering="wait")
    def wait(self, review: Any) -> str:
        return format_duration(review.wait) if review.wait is not None else "-"

    @admin.display(description="review page")
    def open(self, review: Review) -> str:
        """The page with the fields, the document and the decision (only for users who may see content)."""
        return format_html('<a href="{}">{}</a>', reverse("admin:review_page", args=[review.pk]),
                           "review" if review.status == ReviewStatus.PENDING else "decision")

    @admin.display(description="timeline")
    def timeline(self, review: Review) -> str:
        return timeline_link(review.job_id)


def _row_link(rows: QuerySet[Any], label: str, route: str) -> str:
    """A link to the first of ``rows`` (one small query), labelled with its ``label`` column; "-" if none."""
    found = rows.values_list("pk", label).first()
    if found is None:
        return "-"
    return format_html('<a href="{}">{}</a>', reverse(route, args=[found[0]]), found[1])
