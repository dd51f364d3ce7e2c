"""The console's machine-facing routes (``relayops.urls`` includes them at the root)."""

from django.urls import path

from console import endpoints

urlpatterns = [
    path("metrics", endpoints.metrics_view, name="metrics"),
    path("healthz", endpoints.healthz, name="healthz"),
    path("readyz", endpoints.readyz, name="readyz"),
]
