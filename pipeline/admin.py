"""The pipeline's admin: jobs, results, outbox events and reviews, read-only.

Lists select their related rows up front (the query count does not grow with the rows shown) and
never show payloads, results' data or events' payloads. Review decisions go through pipeline.reviews.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from pipeline.models import Attempt, Job, OutboxEvent, Result, Review, ReviewStatus
from pipeline.reviews import decide_review, with_wait
from pipeline.states import JobStatus
from tenancy.admin_base import AgeFilter, PipelineRowAdmin, TenantFilter, age_of, clipped_column, counted
from tenancy.admin_base import format_duration, job_link, timeline_link
from tenancy.services import scope

JOB_FIELDS = (
    "idempotency_key", "tenant", "document_id", "operation_version", "status", "attempt", "max_attempts",
    "created_at", "visible_at", "leased_at", "lease_until", "deadline_at", "lease_owner", "fence",
    "last_error", "finished_at", "reprocessed_from", "payload_hash", "timeline", "spend",
)
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
    actions = None
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
    """Pending or published: each served by its partial index."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("pending", "pending"), ("published", "published")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("pending", "published"):
            return queryset.filter(published_at__isnull=self.value() == "pending")
        return queryset


@admin.register(OutboxEvent)
class OutboxEventAdmin(PipelineRowAdmin):
    list_display = ["key", "tenant", "topic", "created_at", "published_at", "publish_attempts", "age"]
    list_filter = [PublishedFilter, TenantFilter]
    search_fields = ["=idempotency_key"]
    exact_search_fields = ["idempotency_key"]
    ordering = ["-id"]
    actions = None
    fields = readonly_fields = (
        "event_id", "topic", "idempotency_key", "tenant", "created_at", "published_at", "publish_attempts",
        "claimed_until",
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


@admin.register(Review)
class ReviewAdmin(PipelineRowAdmin):
    list_display = [
        "key", "tenant", "document", "version", "status", "created_at", "decided_at", "decided_by",
        "wait", "timeline",
    ]
    list_filter = [TenantFilter, "status", AgeFilter]
    list_select_related = ["job", "decided_by"]
    search_fields = ["=idempotency_key", "document_id"]
    search_help_text = SEARCH_HELP
    exact_search_fields = ["idempotency_key"]
    document_field = "document_id"
    ordering = ["-id"]
    actions = ["approve", "reject"]
    fields = readonly_fields = (
        "idempotency_key", "tenant", "document_id", "job", "event_id", "status", "created_at", "decided_at",
        "decided_by", "wait", "timeline",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Review]:
        return with_wait(super().get_queryset(request).defer("job__payload"))

    key = clipped_column("idempotency_key", "idempotency key")

    document = clipped_column("document_id", "document id")

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("pipeline.decide_review")

    @admin.action(description="Approve selected reviews", permissions=["decide"])
    def approve(self, request: HttpRequest, queryset: QuerySet[Review]) -> HttpResponse | None:
        return self._decide(request, queryset, ReviewStatus.APPROVED)

    @admin.action(description="Reject selected reviews", permissions=["decide"])
    def reject(self, request: HttpRequest, queryset: QuerySet[Review]) -> HttpResponse | None:
        return self._decide(request, queryset, ReviewStatus.REJECTED)

    def _decide(self, request: HttpRequest, queryset: QuerySet[Review], decision: ReviewStatus) -> HttpResponse | None:
        if not self.has_decide_permission(request):  # re-checked on the confirming POST
            raise PermissionDenied
        verb = "approve" if decision == ReviewStatus.APPROVED else "reject"
        confirmed = self.confirm_action(
            request, queryset, action=verb, title=f"{verb.capitalize()} reviews",
            template="admin/pipeline/review/decide_confirmation.html",
        )
        if isinstance(confirmed, HttpResponse) or confirmed is None:
            return confirmed
        chosen = list(queryset.values_list("pk", flat=True))
        decided = sum(decide_review(pk, decision, request.user) for pk in chosen)
        kept = len(chosen) - decided
        if decided:
            self.message_user(request, f"{decision.label} {counted(decided, 'review')}.", messages.SUCCESS)
        if kept:
            self.message_user(request, (
                f"{'Nothing was done: ' if not decided else ''}{counted(kept, 'review')} "
                f"{'was' if kept == 1 else 'were'} already decided and kept {'its' if kept == 1 else 'their'} "
                "decision."
            ), messages.WARNING if decided else messages.ERROR)
        return None

    @admin.display(description="version")
    def version(self, review: Review) -> str:
        return job_link(review.job)

    @admin.display(description="wait", ordering="wait")
    def wait(self, review: Any) -> str:
        return format_duration(review.wait) if review.wait is not None else "-"

    @admin.display(description="timeline")
    def timeline(self, review: Review) -> str:
        return timeline_link(review.job_id)
