"""django-q2's admin pages, adjusted to RelayOps' rules (once, when the admin site first reads its registry).

RelayOps' cluster takes no django-q2 task (its broker has no queue: pipeline.runtime.broker), so there is
nothing to resubmit and no queue to show: the task pages offer no "resubmit" (it would only be refused),
and django-q2's "Queued tasks" page is not registered. The task and schedule pages stay for superusers
(no role grants a django_q permission); their lists accept only their declared filters, search and
ordering, like every RelayOps list (tenancy.admin_base).
"""

from __future__ import annotations

from django.contrib import admin
from django_q.models import Failure, OrmQ, Schedule, Success

from tenancy.admin_base import restrict_lookups


def adjust(site: admin.AdminSite) -> None:
    if site.is_registered(OrmQ):
        site.unregister(OrmQ)
    for model in (Success, Failure, Schedule):
        if site.is_registered(model):
            restrict_lookups(site, model)
    for model in (Success, Failure):
        if site.is_registered(model):
            site.get_model_admin(model).actions = []
