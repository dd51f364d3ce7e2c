"""django-q2's admin pages, adjusted to RelayOps' rules (once, when the admin site first reads its registry).

django-q2 offers "resubmit" on its task pages with no declared permission: it now requires the change
permission, which only superusers hold (no role grants a django_q permission). Its lists accept only
their declared filters, search and ordering, like every RelayOps list (tenancy.admin_base).
"""

from __future__ import annotations

from django.contrib import admin
from django_q.admin import resubmit_task
from django_q.models import Failure, OrmQ, Schedule, Success

from tenancy.admin_base import restrict_lookups


def adjust(site: admin.AdminSite) -> None:
    for model in (Success, Failure, Schedule, OrmQ):
        if site.is_registered(model):
            restrict_lookups(site, model)
    declared = admin.action(description="Resubmit selected tasks to the queue", permissions=["change"])(resubmit_task)
    for model in (Success, Failure):
        site.get_model_admin(model).actions = [declared]
