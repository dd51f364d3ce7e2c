"""Operators acting on what they see: live-job actions and tenant controls, shared by the admin, the API
and commands."""

from django.apps import AppConfig


class ControlsConfig(AppConfig):
    name = "controls"
    verbose_name = "Tenant controls"
