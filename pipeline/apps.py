"""The pipeline app: jobs, leases, retry, outbox, relay, worker."""

from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "pipeline"
    verbose_name = "Pipeline"
