"""The demo app: ``relayops_demo`` (what ``./run demo`` runs) and its dozen invoices."""

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "demo"
    verbose_name = "Demo"
