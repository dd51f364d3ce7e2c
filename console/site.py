"""RelayOps' admin site: Django's, with its titles and the document timeline of a job."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver, path

from console.timeline import document_timeline
from pipeline.models import Job


class RelayOpsAdminSite(admin.AdminSite):
    site_header = "RelayOps"
    site_title = "RelayOps admin"
    index_title = "Operations"

    def get_urls(self) -> list[URLResolver | URLPattern]:
        timeline = path("pipeline/job/<path:object_id>/timeline/", self.admin_view(self.timeline_view),
                        name="pipeline_job_timeline")
        return [timeline, *super().get_urls()]

    def timeline_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Everything that happened to this job's document, every version, in time order. Scoped like
        the job's own page: another tenant's job is a 404."""
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
