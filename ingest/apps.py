"""The ingest app: the HTTP API (``/api/v1/``), its per-tenant API keys, and the ``ingest`` command."""

from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Ingest"
