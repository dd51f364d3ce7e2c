"""The pipeline app: jobs, leases, retry, outbox, relay, worker; ready() wires it into django-q2."""

from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "pipeline"
    verbose_name = "Pipeline"

    def ready(self) -> None:
        from pipeline import checks, cluster  # noqa: F401  (checks register themselves)

        cluster.install()
