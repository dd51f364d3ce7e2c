"""The DLQ's admin: dead letters with the audited "Reprocess as new version", the audit, the refusals.

Everything is read-only; the one action calls dlq.services.reprocess_from_dlq, which enforces the
tenant's rate limit and writes the audit entry. Reasons are codes, never error text.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from dlq.models import AuditEntry, ReprocessRefusal
from dlq.ratelimit import ReprocessLimit
from dlq.services import MAX_REASON_LENGTH, reprocess_from_dlq
from pipeline.errors import NotReprocessableError, ReprocessRateLimitedError
from pipeline.models import DeadLetter, Job
from tenancy.admin_base import AgeFilter, PipelineRowAdmin, TenantFilter, age_of, format_duration, job_link
from tenancy.admin_base import timeline_link
from tenancy.services import scope


class ReprocessForm(forms.Form):
    reason = forms.CharField(
        max_length=MAX_REASON_LENGTH, strip=True, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Why these documents should run again. Kept in the audit entry with your name.",
    )


@dataclass
class ReprocessReport:
    created: list[Job] = field(default_factory=list)
    existing: list[Job] = field(default_factory=list)
    limited: dict[str, ReprocessRateLimitedError] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # not tried: their tenant was already refused
    refused: list[str] = field(default_factory=list)


def _job_links(jobs: list[Job]) -> str:
    return format_html_join(
        ", ", '<a href="{}">{}</a>',
        ((reverse("admin:pipeline_job_change", args=[j.pk]), j.idempotency_key) for j in jobs),
    )


@admin.register(DeadLetter)
class DeadLetterAdmin(PipelineRowAdmin):
    list_display = ["job_key", "tenant", "reason", "last_error", "rule", "attempts", "age", "reprocessed_as",
                    "timeline"]
    list_filter = [TenantFilter, "reason_code", AgeFilter]
    list_select_related = ["job", "reprocess_audit__new_job"]
    search_fields = ["=job__idempotency_key", "=job__document_id"]
    search_help_text = "An exact job key (tenant:document:vN), document id, or tenant:document."
    exact_search_fields = ["job__idempotency_key", "job__document_id"]
    document_field = "job__document_id"
    ordering = ["-id"]
    actions = ["reprocess"]
    fields = readonly_fields = (
        "job", "tenant", "reason_code", "error_code", "rule", "attempts", "created_at", "reprocessed_as", "timeline",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[DeadLetter]:
        return super().get_queryset(request).defer("job__payload", "reprocess_audit__new_job__payload")

    def has_reprocess_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("dlq.reprocess_deadletter")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return super().changelist_view(request, {"quota": self._quota(request), **(extra_context or {})})

    def _quota(self, request: HttpRequest) -> dict[str, Any]:
        """The rate limit and, per visible tenant, reprocesses and refusals in the current window."""
        policy = ReprocessLimit.from_settings()
        since = timezone.now() - policy.window
        used = _per_tenant(request, AuditEntry.objects.filter(at__gt=since))
        refused = _per_tenant(request, ReprocessRefusal.objects.filter(at__gt=since))
        tenants = sorted(set(used) | set(refused))
        return {
            "limit": policy.limit, "window": format_duration(policy.window),
            "rows": [(t, used.get(t, 0), refused.get(t, 0)) for t in tenants],
        }

    @admin.action(description="Reprocess as new version", permissions=["reprocess"])
    def reprocess(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> HttpResponse | None:
        if not self.has_reprocess_permission(request):  # re-checked on the confirming POST
            raise PermissionDenied
        confirmed = self.confirm_action(
            request, queryset, action="reprocess", title="Reprocess dead letters as new versions",
            template="admin/pipeline/deadletter/reprocess_confirmation.html", form_class=ReprocessForm,
        )
        if isinstance(confirmed, HttpResponse) or confirmed is None:
            return confirmed
        report = ReprocessReport()
        for dead_id, tenant in queryset.order_by("id").values_list("id", "tenant"):
            if tenant in report.limited:
                report.skipped[tenant] = report.skipped.get(tenant, 0) + 1
                continue
            try:
                outcome = reprocess_from_dlq(dead_id, request.user, reason=confirmed.cleaned_data["reason"])
            except ReprocessRateLimitedError as refusal:
                report.limited[tenant] = refusal
                report.skipped[tenant] = 1
                continue
            except NotReprocessableError as refusal:
                report.refused.append(str(refusal))
                continue
            (report.created if outcome.created else report.existing).append(outcome.new_job)
        self._tell(request, report)
        return None

    def _tell(self, request: HttpRequest, report: ReprocessReport) -> None:
        if report.created:
            self.message_user(request, format_html(
                "Reprocessed {} dead letter(s) as new versions: {}.", len(report.created), _job_links(report.created)
            ), messages.SUCCESS)
        if report.existing:
            self.message_user(request, format_html(
                "{} dead letter(s) had been reprocessed before; their new job(s): {}.", len(report.existing),
                _job_links(report.existing),
            ), messages.WARNING)
        for tenant, refusal in report.limited.items():
            self.message_user(request, (
                f"Tenant {tenant} reached its reprocess limit: try again in "
                f"{format_duration(dt.timedelta(seconds=refusal.retry_after_seconds))}. "
                f"{report.skipped[tenant]} dead letter(s) of {tenant} were not reprocessed."
            ), messages.ERROR)
        for problem in report.refused:
            self.message_user(request, f"Not reprocessed: {problem}.", messages.ERROR)

    @admin.display(description="job", ordering="job__idempotency_key")
    def job_key(self, dead: DeadLetter) -> str:
        return dead.job.idempotency_key

    @admin.display(description="reason", ordering="reason_code")
    def reason(self, dead: DeadLetter) -> str:
        return dead.reason_code  # the code itself: what runbooks and metrics name

    @admin.display(description="last error", ordering="error_code")
    def last_error(self, dead: DeadLetter) -> str:
        return dead.error_code or "-"

    @admin.display(description="failed rule", ordering="failed_rule")
    def rule(self, dead: DeadLetter) -> str:
        return dead.failed_rule or "-"  # the rule's code, never the values that broke it

    @admin.display(description="age", ordering="created_at")
    def age(self, dead: DeadLetter) -> str:
        return age_of(dead.created_at)

    @admin.display(description="reprocessed as")
    def reprocessed_as(self, dead: DeadLetter) -> str:
        audit = getattr(dead, "reprocess_audit", None)
        return job_link(audit.new_job) if audit is not None else "-"

    @admin.display(description="timeline")
    def timeline(self, dead: DeadLetter) -> str:
        return timeline_link(dead.job_id)


def _per_tenant(request: HttpRequest, rows: QuerySet[Any]) -> dict[str, int]:
    counted = scope(rows, request.user).order_by().values("tenant").annotate(n=Count("id"))
    return {row["tenant"]: row["n"] for row in counted}


class OperatorFilter(admin.SimpleListFilter):
    """The operators who appear in the user's tenants' audit, and no one else's."""

    title = "operator"
    parameter_name = "operator"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = model_admin.get_queryset(request).order_by("operator").values_list("operator", flat=True).distinct()
        return [(name, name) for name in names[:200]]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(operator=self.value()) if self.value() else queryset


@admin.register(AuditEntry)
class AuditEntryAdmin(PipelineRowAdmin):
    """The reprocess history. Read-only for everyone; the database refuses UPDATE and DELETE too."""

    list_display = ["at", "operator", "tenant", "action", "old_version", "new_version", "reason", "timeline"]
    list_filter = [OperatorFilter, TenantFilter, ("at", admin.DateFieldListFilter)]
    list_select_related = ["old_job", "new_job"]
    search_fields = ["=old_job__idempotency_key", "=new_job__idempotency_key", "=operator"]
    exact_search_fields = ["old_job__idempotency_key", "new_job__idempotency_key", "operator"]
    actions = None
    fields = readonly_fields = (
        "at", "action", "tenant", "operator", "reason", "dead_letter", "old_job", "new_job", "timeline",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEntry]:
        return super().get_queryset(request).defer("old_job__payload", "new_job__payload")

    @admin.display(description="old job", ordering="old_job__operation_version")
    def old_version(self, entry: AuditEntry) -> str:
        return format_html("{} ({})", job_link(entry.old_job), entry.old_job.idempotency_key)

    @admin.display(description="new job", ordering="new_job__operation_version")
    def new_version(self, entry: AuditEntry) -> str:
        return format_html("{} ({})", job_link(entry.new_job), entry.new_job.idempotency_key)

    @admin.display(description="timeline")
    def timeline(self, entry: AuditEntry) -> str:
        return timeline_link(entry.old_job_id)


@admin.register(ReprocessRefusal)
class ReprocessRefusalAdmin(PipelineRowAdmin):
    """Reprocesses the tenant rate limit refused: counted, so a hammering script is visible."""

    list_display = ["at", "tenant", "operator", "dead_letter_job", "retry_after", "timeline"]
    list_filter = [TenantFilter, ("at", admin.DateFieldListFilter)]
    list_select_related = ["dead_letter__job"]
    search_fields = ["=operator"]
    exact_search_fields = ["operator"]
    actions = None
    fields = readonly_fields = ("at", "tenant", "operator", "dead_letter", "retry_after_seconds")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReprocessRefusal]:
        return super().get_queryset(request).defer("dead_letter__job__payload")

    @admin.display(description="dead letter")
    def dead_letter_job(self, refusal: ReprocessRefusal) -> str:
        url = reverse("admin:pipeline_deadletter_change", args=[refusal.dead_letter_id])
        return format_html('<a href="{}">{}</a>', url, refusal.dead_letter.job.idempotency_key)

    @admin.display(description="retry after", ordering="retry_after_seconds")
    def retry_after(self, refusal: ReprocessRefusal) -> str:
        return format_duration(dt.timedelta(seconds=refusal.retry_after_seconds))

    @admin.display(description="timeline")
    def timeline(self, refusal: ReprocessRefusal) -> str:
        return timeline_link(refusal.dead_letter.job_id)
