"""The tenancy app: who belongs to which tenants, and in which role (Operators or Auditors)."""

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "tenancy"
    verbose_name = "Tenancy and roles"
