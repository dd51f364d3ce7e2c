"""The controls in the admin: cancel and run-now on jobs (the list's actions and buttons on a job's page),
and the tenant controls list (pause / resume intake, the reprocess limit).

Every action calls a ``controls.services`` function with the signed-in user, which checks the
permission and tenant again and writes the audit entry with the reason the confirmation page asks for.
The job admin is pipeline's, with the actions added here (pipeline cannot import the controls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from controls import services
from controls.errors import NotApplicableError, NotFoundError, NotPermittedError
from dlq.audit import MAX_REASON
from dlq.ratelimit import ReprocessLimit
from pipeline.admin import JobAdmin
from pipeline.models import Job
from pipeline.states import JobStatus
from relayops.errors import InvalidInputError
from tenancy.admin_base import PipelineRowAdmin, TenantFilter, age_of, counted, format_duration
from tenancy.models import Membership, TenantControl
from tenancy.services import tenants_of

REFUSED = (NotApplicableError, NotFoundError, NotPermittedError, InvalidInputError)


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=MAX_REASON, strip=True, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Why. Kept in the audit entry with your name.",
    )


class LimitForm(ReasonForm):
    limit = forms.IntegerField(
        min_value=1, max_value=services.MAX_REPROCESS_LIMIT, required=False,
        help_text="Reprocesses per window for the selected tenants; leave empty for the default.",
    )
    field_order = ["limit", "reason"]


JOB_ACTIONS: dict[str, tuple[str, str, Callable[..., Job]]] = {
    # action name: (permission codename, verb, service)
    "cancel": ("cancel_job", "Cancel", services.cancel_job),
    "run_now": ("run_job_now", "Run now", services.run_job_now),
}


class ControlledJobAdmin(JobAdmin):
    """The jobs list and page, with cancel and run-now."""

    actions = ["cancel_jobs", "run_jobs_now"]
    change_form_template = "admin/pipeline/job/change_form.html"

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("tenancy.cancel_job")

    def has_run_now_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("tenancy.run_job_now")

    @admin.action(description="Cancel selected jobs (queued or leased)", permissions=["cancel"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self._act(request, queryset, "cancel", "cancel_jobs")

    @admin.action(description="Run selected delayed jobs now", permissions=["run_now"])
    def run_jobs_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        return self._act(request, queryset, "run_now", "run_jobs_now")

    def _act(self, request: HttpRequest, queryset: QuerySet[Job], name: str, action: str) -> HttpResponse | None:
        codename, verb, service = JOB_ACTIONS[name]
        if not request.user.has_perm(f"tenancy.{codename}"):  # re-checked on the confirming POST
            raise PermissionDenied
        confirmed = self.confirm_action(
            request, queryset, action=action, title=f"{verb} jobs", form_class=ReasonForm,
            template="admin/pipeline/job/control_confirmation.html",
        )
        if isinstance(confirmed, HttpResponse) or confirmed is None:
            return confirmed
        done, refused = 0, []
        for pk in queryset.order_by("pk").values_list("pk", flat=True):
            try:
                service(pk, request.user, reason=confirmed.cleaned_data["reason"])
                done += 1
            except REFUSED as exc:
                refused.append(str(exc))
        if done:
            self.message_user(request, f"{verb}: {counted(done, 'job')} done.", messages.SUCCESS)
        for problem in refused:
            self.message_user(request, f"Not done: {problem}", messages.ERROR)
        return None

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        own = [path(f"<path:object_id>/{name.replace('_', '-')}/", self.admin_site.admin_view(self._one_view(name)),
                    name=f"{info[0]}_{info[1]}_{name}") for name in JOB_ACTIONS]
        return own + super().get_urls()

    def _one_view(self, name: str) -> Callable[..., HttpResponse]:
        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            return self.one_job_view(request, object_id, name)
        return view

    def one_job_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        """One job's cancel or run-now, from its page: a form with the reason, then the service."""
        codename, verb, service = JOB_ACTIONS[name]
        if not self.has_view_permission(request):
            raise PermissionDenied
        job = self.get_object(request, unquote(object_id))  # another tenant's: 404, like a missing one
        if not request.user.has_perm(f"tenancy.{codename}"):
            raise PermissionDenied
        form = ReasonForm(request.POST if request.method == "POST" else None)
        if form.is_bound and form.is_valid():
            try:
                service(job.pk, request.user, reason=form.cleaned_data["reason"])
            except REFUSED as exc:
                self.message_user(request, f"Not done: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{verb}: job {job.pk} ({job.idempotency_key}) done.", messages.SUCCESS)
            return HttpResponseRedirect(reverse("admin:pipeline_job_change", args=[job.pk]))
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "job": job, "form": form, "verb": verb,
            "title": f"{verb}: {job.idempotency_key}", "media": self.media + form.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/pipeline/job/control_form.html", context)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        job = self.get_object(request, unquote(object_id))
        now = timezone.now()
        offered = {
            "cancel": self.has_cancel_permission(request) and job.status in (JobStatus.QUEUED, JobStatus.LEASED),
            "run_now": self.has_run_now_permission(request) and job.status == JobStatus.QUEUED and job.visible_at > now,
        }
        controls = [(reverse(f"admin:pipeline_job_{name}", args=[job.pk]), JOB_ACTIONS[name][1])
                    for name, shown in offered.items() if shown]
        paused = TenantControl.objects.filter(tenant=job.tenant, intake_paused=True).exists()
        return super().change_view(request, object_id, form_url,
                                   {"job_controls": controls, "intake_paused": paused, **(extra_context or {})})


admin.site.unregister(Job)
admin.site.register(Job, ControlledJobAdmin)


class IntakeFilter(admin.SimpleListFilter):
    title = "intake"
    parameter_name = "intake"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("paused", "paused"), ("open", "open")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("paused", "open"):
            return queryset.filter(intake_paused=self.value() == "paused")
        return queryset


@admin.register(TenantControl)
class TenantControlAdmin(PipelineRowAdmin):
    """One row per tenant: its intake (paused or open) and its reprocess limit, changed by the actions."""

    list_display = ["tenant", "intake", "live_jobs", "limit", "updated_at"]
    list_filter = [TenantFilter, IntakeFilter]
    search_fields = ["=tenant"]
    exact_search_fields = ["tenant"]
    ordering = ["tenant"]
    actions = ["pause", "resume", "set_limit"]
    fields = readonly_fields = ("tenant", "intake", "live_jobs", "limit", "updated_at")

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("tenancy.pause_intake")

    def has_limit_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("tenancy.set_reprocess_limit")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """Every tenant the user may see has a row here: one with the defaults is made for a tenant without
        (a tenant is its members' name; for superusers, every tenant with a member)."""
        tenants = tenants_of(request.user)
        names = tenants if tenants is not None else set(Membership.objects.values_list("tenant", flat=True).distinct())
        now = timezone.now()
        TenantControl.objects.bulk_create([TenantControl(tenant=t, updated_at=now) for t in sorted(names)],
                                          ignore_conflicts=True)
        return super().changelist_view(request, extra_context)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        tenants = [row.tenant for row in changelist.result_list]
        self._live = dict(Job.objects.live().filter(tenant__in=tenants).order_by().values("tenant")
                          .annotate(n=Count("pk")).values_list("tenant", "n"))
        return changelist

    @admin.display(description="intake", ordering="intake_paused")
    def intake(self, control: TenantControl) -> str:
        if control.intake_paused:
            return format_html("<strong>paused</strong> for {}", age_of(control.paused_at))
        return "open"

    @admin.display(description="live jobs")
    def live_jobs(self, control: TenantControl) -> int:
        live = getattr(self, "_live", None)
        if live is not None and control.tenant in live:
            return live[control.tenant]
        return Job.objects.live().filter(tenant=control.tenant).count()

    @admin.display(description="reprocess limit")
    def limit(self, control: TenantControl) -> str:
        policy = ReprocessLimit.from_settings()
        own = control.reprocess_limit
        return (f"{own} per {format_duration(policy.window)}" if own
                else f"{policy.limit} per {format_duration(policy.window)} (default)")

    @admin.action(description="Pause intake of selected tenants", permissions=["pause"])
    def pause(self, request: HttpRequest, queryset: QuerySet[TenantControl]) -> HttpResponse | None:
        return self._each(request, queryset, "pause", "Pause intake", "pause_intake",
                          lambda t, reason, form: services.pause_intake(t, request.user, reason=reason))

    @admin.action(description="Resume intake of selected tenants", permissions=["pause"])
    def resume(self, request: HttpRequest, queryset: QuerySet[TenantControl]) -> HttpResponse | None:
        return self._each(request, queryset, "resume", "Resume intake", "pause_intake",
                          lambda t, reason, form: services.resume_intake(t, request.user, reason=reason))

    @admin.action(description="Set the reprocess limit of selected tenants", permissions=["limit"])
    def set_limit(self, request: HttpRequest, queryset: QuerySet[TenantControl]) -> HttpResponse | None:
        return self._each(request, queryset, "set_limit", "Set the reprocess limit", "set_reprocess_limit",
                          lambda t, reason, form: services.set_reprocess_limit(
                              t, form.cleaned_data["limit"], request.user, reason=reason),
                          form_class=LimitForm)

    def _each(self, request: HttpRequest, queryset: QuerySet[TenantControl], action: str, title: str, codename: str,
              call: Callable[[str, str, forms.Form], object], form_class: type[ReasonForm] = ReasonForm,
              ) -> HttpResponse | None:
        if not request.user.has_perm(f"tenancy.{codename}"):  # re-checked on the confirming POST
            raise PermissionDenied
        confirmed = self.confirm_action(request, queryset, action=action, title=title, form_class=form_class,
                                        template="admin/tenancy/tenantcontrol/control_confirmation.html")
        if isinstance(confirmed, HttpResponse) or confirmed is None:
            return confirmed
        done = 0
        for tenant in queryset.order_by("tenant").values_list("tenant", flat=True):
            try:
                call(tenant, confirmed.cleaned_data["reason"], confirmed)
                done += 1
            except REFUSED as exc:
                self.message_user(request, f"Not done: {exc}", messages.WARNING)
        if done:
            self.message_user(request, f"{title}: {counted(done, 'tenant')} done.", messages.SUCCESS)
        return None

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        try:
            return super().get_object(request, object_id, from_field)
        except (ValueError, Http404):
            raise Http404("No such object.") from None
