"""The webhooks app: per-tenant endpoints that receive the outbox's events as signed HTTP POSTs."""

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    label = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from webhooks import checks  # noqa: F401  (registers the system checks)
