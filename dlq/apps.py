"""The DLQ app: reprocessing dead letters as new versions, its rate limit, and the audit of who decided what."""

from django.apps import AppConfig


class DlqConfig(AppConfig):
    name = "dlq"
    verbose_name = "Dead letters and audit"
