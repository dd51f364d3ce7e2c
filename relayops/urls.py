"""URL routes: the admin (console.site) is the operators' and auditors' interface; ``/api/v1/`` is the
ingest API; ``/metrics``, ``/healthz`` and ``/readyz`` are the console's machine-facing endpoints (apps
included by name, so this module imports no app)."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("ingest.urls")),
    path("", include("console.urls")),
]
