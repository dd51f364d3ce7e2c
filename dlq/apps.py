"""The DLQ app: dead letters, audited reprocess."""

from django.apps import AppConfig


class DlqConfig(AppConfig):
    name = "dlq"
    verbose_name = "Dead letters"
