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
        from console import checks  # noqa: F401  (checks register themselves)


class ConsoleAdminConfig(admin_apps.SimpleAdminConfig):
    """Django's admin app, serving RelayOps' admin site (``console.site.RelayOpsAdminSite``).

    Django's SimpleAdminConfig: start-up does not import every app's ``admin`` module. The site imports
    them at the first look at its registry (a request's URLconf, the admin checks, any code reading it),
    so a cluster node, which never looks, and each worker it forks do not carry the admin's modules.
    The site itself exists from start-up: Django's admin checks check the sites that exist.
    """

    default = False
    default_site = "console.site.RelayOpsAdminSite"

    def ready(self) -> None:
        super().ready()
        from django.contrib import admin

        admin.site.name  # noqa: B018  (instantiates the lazy default site; its registry stays unread)
