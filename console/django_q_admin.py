"""django-q2's admin pages, adjusted to RelayOps' rules (called once, from ConsoleConfig.ready()).

django-q2 offers "resubmit" on its task pages with no declared permission: it now requires the change
permission, which only superusers hold (no role grants a django_q permission).
"""

from __future__ import annotations

from django.contrib import admin
from django_q.admin import resubmit_task
from django_q.models import Failure, Success


def adjust(site: admin.AdminSite) -> None:
    declared = admin.action(description="Resubmit selected tasks to the queue", permissions=["change"])(resubmit_task)
    for model in (Success, Failure):
        site.get_model_admin(model).actions = [declared]
