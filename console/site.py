"""RelayOps' admin site: Django's, with its titles, the dashboard as its front page (the app list below
it), the document timeline of a job and the review page (``review.views``: read a result beside its
document, decide it, walk the queue of pending reviews).

Its registrations are imported at the first look at its registry, not at start-up (console.apps): every
app's ``admin`` module, then django-q2's and django-axes' pages adjusted to RelayOps' rules. What its
pages need is imported when they are first asked for.

Django's "view on site" shortcut (``r/<content_type>/<id>/``) is answered with the same 404 for every
object: no RelayOps model has a public URL, and Django's answer told an existing row (another
tenant's, a pipeline row) from a missing one.
"""

from __future__ import annotations

import threading
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver, path
from django.utils.module_loading import autodiscover_modules

from pipeline.clock import system_clock


class RelayOpsAdminSite(admin.AdminSite):
    site_header = "RelayOps"
    site_title = "RelayOps admin"
    index_title = "Operations"
    index_template = "admin/relayops/dashboard.html"

    def __init__(self, name: str = "admin") -> None:
        self._discovered = False
        self._discovering = False
        self._discovery = threading.RLock()  # re-entered by the admin modules' register() calls
        super().__init__(name)

    @property
    def _registry(self) -> dict[type[Any], admin.ModelAdmin[Any]]:
        """Every read of the registry (Django's own methods read it directly) finds it complete; another
        thread's read waits for the discovery in progress. A discovery that fails leaves it undiscovered:
        the next read raises again, as a failing start-up did."""
        if not self._discovered:
            with self._discovery:
                if not self._discovered and not self._discovering:
                    self._discovering = True
                    try:
                        self._discover()
                        self._discovered = True
                    finally:
                        self._discovering = False
        return self._models

    @_registry.setter
    def _registry(self, models: dict[type[Any], admin.ModelAdmin[Any]]) -> None:
        self._models = models

    def _discover(self) -> None:
        from console import django_q_admin, signin

        autodiscover_modules("admin", register_to=self)
        django_q_admin.adjust(self)
        signin.adjust(self)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        from review.views import ReviewViews

        timeline = path("pipeline/job/<path:object_id>/timeline/", self.admin_view(self.timeline_view),
                        name="pipeline_job_timeline")
        shortcut = path("r/<path:content_type_id>/<path:object_id>/", self.admin_view(self.no_shortcut),
                        name="view_on_site")
        data = path("dashboard.json", self.admin_view(self.dashboard_data), name="relayops_dashboard_data")
        urls = [url for url in super().get_urls() if getattr(url, "name", None) != "view_on_site"]
        return [timeline, shortcut, data, *ReviewViews(self).urls(), *urls]

    def index(self, request: HttpRequest, extra_context: dict | None = None) -> TemplateResponse:
        """The dashboard, for the window in the URL (``?window=1h|24h|7d``), above Django's app list."""
        from console import dashboard
        from tenancy.services import tenants_of

        data = dashboard.build(system_clock.now(), request.GET.get("window", ""), tenants_of(request.user))
        return super().index(request, {**(extra_context or {}), "dashboard": data})

    def dashboard_data(self, request: HttpRequest) -> HttpResponse:
        """The dashboard's numbers and series as JSON: what its script fetches every few seconds."""
        from console import dashboard
        from tenancy.services import tenants_of

        data = dashboard.build(system_clock.now(), request.GET.get("window", ""), tenants_of(request.user))
        return JsonResponse(data)

    def no_shortcut(self, request: HttpRequest, content_type_id: str, object_id: str) -> HttpResponse:
        """The same 404 whatever the object: whether a row exists is not the shortcut's to tell."""
        raise Http404("No such page.")

    def timeline_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Everything that happened to this job's document, every version, in time order. Scoped like
        the job's own page: another tenant's job is a 404."""
        from console.timeline import document_timeline
        from pipeline.models import Job

        jobs = self.get_model_admin(Job)
        if not jobs.has_view_permission(request):
            raise PermissionDenied
        job = jobs.get_object(request, unquote(object_id))
        if job is None:  # missing or another tenant's: the same answer
            raise Http404("No such job.")
        context = {
            **self.each_context(request), "opts": jobs.opts, "job": job,
            "title": f"Timeline of {job.tenant}:{job.document_id}",
            "timeline": document_timeline(job.tenant, job.document_id),
        }
        request.current_app = self.name
        return TemplateResponse(request, "admin/pipeline/job/timeline.html", context)
