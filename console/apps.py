"""The console app: what operators and auditors see across the apps (the admin site, document timelines,
``relayops_status``, the sign-in lockout page), and the one place where django-q2's and django-axes'
admin pages are adjusted."""

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console"
    default = True

    def ready(self) -> None:
        from django.contrib import admin

        from console import checks, django_q_admin, signin  # noqa: F401  (checks register themselves)

        django_q_admin.adjust(admin.site)
        signin.adjust(admin.site)


class ConsoleAdminConfig(admin_apps.AdminConfig):
    """Django's admin app, serving RelayOps' admin site (``console.site.RelayOpsAdminSite``)."""

    default = False
    default_site = "console.site.RelayOpsAdminSite"
