"""Sign-in protection as people see it: django-axes' lockout page and its admin pages.

The lockout rules are settings (relayops/settings.py, "Sign-in throttling"). Superusers unlock a
username or an address by deleting its row under Axes › Access attempts; no role grants that.
"""

from __future__ import annotations

from typing import Any

from axes.conf import settings
from axes.helpers import get_cool_off, get_failure_limit
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from relayops.formatting import format_duration
from tenancy.admin_base import restrict_lookups


def locked_out(request: HttpRequest, original_response: Any = None, credentials: Any = None) -> HttpResponse:
    """The page a locked-out sign-in gets (AXES_LOCKOUT_CALLABLE): why, for how long, who can lift it."""
    cool_off = get_cool_off(request)
    context = {
        **admin.site.each_context(request),
        "failure_limit": get_failure_limit(request, credentials),
        "duration": format_duration(cool_off) if cool_off else None,
    }
    return render(request, "admin/locked_out.html", context, status=settings.AXES_HTTP_RESPONSE_CODE)


def adjust(site: admin.AdminSite) -> None:
    """django-axes' admin pages accept only their declared filters, search and ordering, like ours, and
    its "clean up expired attempts" action requires the delete permission (superusers only)."""
    for model in (AccessAttempt, AccessLog, AccessFailureLog):
        if site.is_registered(model):
            restrict_lookups(site, model)
    if site.is_registered(AccessAttempt):
        attempts = site.get_model_admin(AccessAttempt)
        cleanup = getattr(type(attempts), "cleanup_expired_attempts")
        attempts.actions = [admin.action(description="Clean up expired attempts", permissions=["delete"])(cleanup)]
