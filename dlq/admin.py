"""The DLQ's admin: dead letters with the audited "Reprocess as new version", the audit, the refusals.

Everything is read-only; the one action calls dlq.services.reprocess_many for the rows selected on the
page, or dlq.bulk.reprocess_matching for "all N matching" (however many the filters match), each row in
its own transaction (rate limit, audit); the action reports what happened. Its confirmation page warns
how many selected would fail the same way again (dlq.repeats). Reasons are codes, never error text.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from dlq.errors import status_words
from dlq.bulk import BulkReport, not_reprocessed, reprocess_matching
from dlq.models import AuditAction, AuditEntry, ReprocessRefusal
from dlq.ratelimit import ReprocessLimit
from dlq.repeats import same_failure
from dlq.services import MAX_REASON_LENGTH, RowOutcome, RowResult, reprocess_many
from pipeline.models import DeadLetter, Job
from tenancy.admin_base import AgeFilter, PipelineRowAdmin, TenantFilter, age_of, clipped, counted, format_duration
from tenancy.admin_base import job_link, timeline_link
from tenancy.models import TenantControl
from tenancy.services import scope


class ReprocessedFilter(admin.SimpleListFilter):
    """Reprocessed or not yet: whether an audit entry names the dead letter (its one-to-one index)."""

    title = "reprocessed"
    parameter_name = "reprocessed"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", "not yet reprocessed"), ("yes", "reprocessed")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "no":
            return not_reprocessed(queryset)
        if self.value() == "yes":
            return queryset.filter(reprocess_audit__isnull=False)
        return queryset


class ReprocessForm(forms.Form):
    reason = forms.CharField(
        max_length=MAX_REASON_LENGTH, strip=True, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Why these documents should run again. Kept in the audit entry with your name.",
    )


def _job_links(jobs: list[Job], *, status: bool = False) -> str:
    """Links to jobs by key; with ``status``, each says where it stands: ``acme:doc:v2 (queued)``."""
    return format_html_join(", ", '<a href="{}">{}</a>{}', (
        (reverse("admin:pipeline_job_change", args=[j.pk]), j.idempotency_key,
         f" ({status_words(j)})" if status else "")
        for j in jobs
    ))


@admin.register(DeadLetter)
class DeadLetterAdmin(PipelineRowAdmin):
    list_display = ["job_key", "tenant", "reason", "last_error", "rule", "attempts", "age", "reprocessed_as",
                    "timeline"]
    list_filter = [TenantFilter, "reason_code", ReprocessedFilter, AgeFilter]
    list_select_related = ["job", "reprocess_audit__new_job"]
    search_fields = ["=job__idempotency_key", "job__document_id"]
    search_help_text = (
        "An exact job key (tenant:document:vN), the start of a document id, or tenant:start of a document id."
    )
    exact_search_fields = ["job__idempotency_key"]
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
        """The default rate limit and, per visible tenant with activity or its own limit, its limit and
        its reprocesses and refusals in the current window."""
        policy = ReprocessLimit.from_settings()
        since = timezone.now() - policy.window
        used = _per_tenant(request, AuditEntry.objects.filter(at__gt=since, action=AuditAction.REPROCESS))
        refused = _per_tenant(request, ReprocessRefusal.objects.filter(at__gt=since))
        own = dict(scope(TenantControl.objects.filter(reprocess_limit__isnull=False), request.user)
                   .values_list("tenant", "reprocess_limit"))
        tenants = sorted(set(used) | set(refused) | set(own))
        return {
            "limit": policy.limit, "window": format_duration(policy.window),
            "rows": [(t, own.get(t, policy.limit), used.get(t, 0), refused.get(t, 0)) for t in tenants],
        }

    @admin.action(description="Reprocess as new version", permissions=["reprocess"])
    def reprocess(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> HttpResponse | None:
        if not self.has_reprocess_permission(request):  # re-checked on the confirming POST
            raise PermissionDenied
        confirmed = self.confirm_action(
            request, queryset, action="reprocess", title="Reprocess dead letters as new versions",
            template="admin/pipeline/deadletter/reprocess_confirmation.html", form_class=ReprocessForm,
            across=True, extra_context=_warnings,
        )
        if isinstance(confirmed, HttpResponse) or confirmed is None:
            return confirmed
        reason = confirmed.cleaned_data["reason"]
        if request.POST.get("select_across") == "1":
            self._tell_bulk(request, reprocess_matching(queryset, request.user, reason=reason))
            return None
        ids = list(queryset.order_by("id").values_list("id", flat=True))
        outcomes = reprocess_many(ids, request.user, reason=reason)
        self._log(request, outcomes)
        self._tell(request, outcomes)
        return None

    def _log(self, request: HttpRequest, outcomes: list[RowOutcome]) -> None:
        """Each reprocessed row in Django's admin history ("Recent actions", the dead letter's history);
        the audit entry, written with the new version, is the record."""
        made = {o.dead_letter_id: o.job for o in outcomes if o.result == RowResult.REPROCESSED and o.job is not None}
        for dead in DeadLetter.objects.filter(pk__in=list(made)).select_related("job").defer("job__payload"):
            self.log_change(request, dead, f"Reprocessed as {made[dead.pk].idempotency_key} (audited).")

    def _tell_bulk(self, request: HttpRequest, report: BulkReport) -> None:
        """All N matching: counts per outcome (the rows are too many to name), links to the first new versions."""
        if report.reprocessed:
            more = report.reprocessed - len(report.created)
            self.message_user(request, format_html(
                "Reprocessed {} as new versions: {}{}.", counted(report.reprocessed, "dead letter"),
                _job_links(report.created), f" and {more} more" if more > 0 else "",
            ), messages.SUCCESS)
        others = {result: n for result, n in report.results.items() if n and result != RowResult.REPROCESSED
                  and result != RowResult.RATE_LIMITED}
        if others:
            self.message_user(request, "Not reprocessed: " + ", ".join(
                f"{n} {result.value.replace('_', ' ')}" for result, n in sorted(others.items())
            ) + (f" ({'; '.join(report.details)})" if report.details else "") + ". Nothing was changed for those.",
                messages.WARNING)
        for tenant, wait in sorted(report.retry_after_seconds.items()):
            left = report.not_tried[tenant] + 1
            self.message_user(request, (
                f"Tenant {tenant} reached its reprocess limit: {counted(left, 'dead letter')} of {tenant} "
                f"{'was' if left == 1 else 'were'} not reprocessed. Try again in "
                f"{format_duration(dt.timedelta(seconds=wait))}, or raise the tenant's limit in its tenant control."
            ), messages.ERROR)
        if not sum(report.results.values()):
            self.message_user(request, "Nothing was done: no matching dead letter is left to reprocess.",
                              messages.WARNING)

    def _tell(self, request: HttpRequest, outcomes: list[RowOutcome]) -> None:
        """One message per kind of outcome; every row is in exactly one of them."""
        by_result: dict[RowResult, list[RowOutcome]] = {result: [] for result in RowResult}
        for outcome in outcomes:
            by_result[outcome.result].append(outcome)
        created = [o.job for o in by_result[RowResult.REPROCESSED] if o.job is not None]
        if created:
            self.message_user(request, format_html(
                "Reprocessed {} as {}: {}.", counted(len(created), "dead letter"),
                "a new version" if len(created) == 1 else "new versions", _job_links(created),
            ), messages.SUCCESS)
        before = [o.job for o in by_result[RowResult.ALREADY_REPROCESSED] if o.job is not None]
        if before:
            self.message_user(request, format_html(
                "{} had been reprocessed before, nothing new was created; {}: {}.", counted(len(before), "dead letter"),
                "its new version" if len(before) == 1 else "their new versions", _job_links(before, status=True),
            ), messages.WARNING)
        for outcome in by_result[RowResult.VERSION_EXISTS] + by_result[RowResult.CONFLICT]:
            self._tell_existing(request, outcome)
        self._tell_limited(request, by_result[RowResult.RATE_LIMITED])
        for outcome in by_result[RowResult.NOT_REPROCESSABLE]:
            self.message_user(request, f"Not reprocessed: {outcome.detail}. Nothing was changed.", messages.ERROR)

    def _tell_existing(self, request: HttpRequest, outcome: RowOutcome) -> None:
        if outcome.job is None:
            return
        link, status = _job_links([outcome.job]), status_words(outcome.job)
        if outcome.result == RowResult.VERSION_EXISTS:
            self.message_user(request, format_html(
                "Not reprocessed: {} already exists with the same document and is {}; nothing new was created. "
                "To run it again, reprocess its own dead letter.", link, status,
            ), messages.WARNING)
        else:
            self.message_user(request, format_html(
                "Not reprocessed: {} already exists with a different document and is {}; reprocessing the older "
                "version would conflict with it. Nothing was changed.", link, status,
            ), messages.ERROR)

    def _tell_limited(self, request: HttpRequest, limited: list[RowOutcome]) -> None:
        for tenant in sorted({o.tenant for o in limited}):
            rows = [o for o in limited if o.tenant == tenant]
            wait = min(o.retry_after_seconds or 0 for o in rows)
            self.message_user(request, (
                f"Tenant {tenant} reached its reprocess limit: try again in "
                f"{format_duration(dt.timedelta(seconds=wait))}. {counted(len(rows), 'dead letter')} of {tenant} "
                f"{'was' if len(rows) == 1 else 'were'} not reprocessed."
            ), messages.ERROR)

    @admin.display(description="job", ordering="job__idempotency_key")
    def job_key(self, dead: DeadLetter) -> str:
        return clipped(dead.job.idempotency_key)

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


def _warnings(queryset: QuerySet[DeadLetter]) -> dict[str, Any]:
    """What the confirmation page warns about: how many selected will fail the same way again."""
    return {"same_failure": same_failure(not_reprocessed(queryset)).count()}


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
    """Every operator decision: reprocesses, review decisions, live-job actions, redeliveries. Read-only for
    everyone; the database refuses UPDATE and DELETE too."""

    list_display = ["at", "operator", "tenant", "action", "old_version", "new_version", "reason", "detail", "timeline"]
    list_filter = [OperatorFilter, TenantFilter, "action", ("at", admin.DateFieldListFilter)]
    list_select_related = ["old_job", "new_job", "job"]
    search_fields = ["=old_job__idempotency_key", "=new_job__idempotency_key", "=operator"]
    exact_search_fields = ["old_job__idempotency_key", "new_job__idempotency_key", "operator"]
    actions = None
    fields = readonly_fields = (
        "at", "action", "tenant", "operator", "reason", "detail", "dead_letter", "old_job", "new_job", "job",
        "review", "event_id", "timeline",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEntry]:
        return super().get_queryset(request).defer("old_job__payload", "new_job__payload", "job__payload")

    @admin.display(description="job", ordering="old_job__operation_version")
    def old_version(self, entry: AuditEntry) -> str:
        job = entry.old_job or entry.job
        return format_html("{} ({})", job_link(job), clipped(job.idempotency_key)) if job else "–"

    @admin.display(description="new job", ordering="new_job__operation_version")
    def new_version(self, entry: AuditEntry) -> str:
        job = entry.new_job
        return format_html("{} ({})", job_link(job), clipped(job.idempotency_key)) if job else "–"

    @admin.display(description="timeline")
    def timeline(self, entry: AuditEntry) -> str:
        job_id = entry.old_job_id or entry.job_id
        return timeline_link(job_id) if job_id else "–"


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
        return format_html('<a href="{}">{}</a>', url, clipped(refusal.dead_letter.job.idempotency_key))

    @admin.display(description="retry after", ordering="retry_after_seconds")
    def retry_after(self, refusal: ReprocessRefusal) -> str:
        return format_duration(dt.timedelta(seconds=refusal.retry_after_seconds))

    @admin.display(description="timeline")
    def timeline(self, refusal: ReprocessRefusal) -> str:
        return timeline_link(refusal.dead_letter.job_id)
