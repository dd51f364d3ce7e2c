"""The pipeline app: jobs, leases, retry, outbox, relay, the worker loop and maintenance.

``ready()`` registers the start-up checks and wires the runtime into django-q2's process tree.
"""

from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "pipeline"
    verbose_name = "Pipeline"

    def ready(self) -> None:
        from pipeline import checks  # noqa: F401  (checks register themselves)
        from pipeline.runtime import cluster

        cluster.install()
