"""Per-tenant reprocess rate limit: at most the tenant's limit (its TenantControl row, set in the admin's
tenant controls; else REPROCESS_LIMIT, 20) reprocesses per REPROCESS_WINDOW_SECONDS (an hour).

The count is of audit entries (one per reprocess that created a job) in the sliding window, taken
under a per-tenant lock held until the reprocess commits, so concurrent reprocesses cannot overshoot.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from dlq.models import AuditAction, AuditEntry, ReprocessRefusal
from pipeline.errors import InvalidInputError, ReprocessRateLimitedError
from relayops.validation import check_int
from tenancy.models import TenantControl

# Serialise the reprocesses of one tenant until the transaction ends. The first key namespaces our
# advisory locks (0x52454c41, "RELA"); the second is the tenant's 32-bit hash. Two tenants sharing a
# hash only wait for each other: the count itself is exact. SQLite needs none: its immediate
# transactions already serialise writers.
TENANT_LOCK = "SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(%(tenant)s))"
LOCK_NAMESPACE = 0x52454C41


@dataclass(frozen=True)
class ReprocessLimit:
    limit: int
    window: dt.timedelta

    @classmethod
    def from_settings(cls) -> ReprocessLimit:
        limit = settings.RELAYOPS.get("REPROCESS_LIMIT", 20)
        seconds = settings.RELAYOPS.get("REPROCESS_WINDOW_SECONDS", 3600)
        for name, value in (("REPROCESS_LIMIT", limit), ("REPROCESS_WINDOW_SECONDS", seconds)):
            try:
                check_int(name, value, low=1)
            except InvalidInputError as exc:
                raise ImproperlyConfigured(f"RELAYOPS[{name!r}] {exc.problem}") from exc
        return cls(limit=limit, window=dt.timedelta(seconds=seconds))

    @classmethod
    def for_tenant(cls, tenant: str) -> ReprocessLimit:
        """The tenant's own limit (``tenancy.TenantControl.reprocess_limit``, set by an operator with the
        permission) or, without one, the setting's; the window is the setting's either way."""
        default = cls.from_settings()
        own = TenantControl.objects.filter(tenant=tenant).values_list("reprocess_limit", flat=True).first()
        return cls(limit=own, window=default.window) if own else default

    def retry_after(self, recent: list[dt.datetime], now: dt.datetime) -> int | None:
        """Seconds until one more reprocess fits, or None if one fits now.

        ``recent`` holds the newest reprocess times in the window, newest first, at most ``limit``
        of them. The limit-th newest leaving the window is what makes room.
        """
        if len(recent) < self.limit:
            return None
        return max(1, math.ceil((recent[self.limit - 1] + self.window - now).total_seconds()))


def lock_tenant(tenant: str) -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("the reprocess rate limit must be checked inside the reprocess transaction")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(TENANT_LOCK, {"namespace": LOCK_NAMESPACE, "tenant": tenant})


def check_reprocess_allowed(tenant: str, now: dt.datetime, *, operator: str) -> None:
    """Raise ReprocessRateLimitedError (with the seconds to wait) if ``tenant`` is at its limit.

    Callers hold the transaction that will write the audit entry: the tenant's lock taken here is
    held until it ends. ``operator`` is accepted for the refusal's record, written by the caller
    once the refused transaction has rolled back (see record_refusal).
    """
    lock_tenant(tenant)
    policy = ReprocessLimit.for_tenant(tenant)
    recent = list(
        AuditEntry.objects.filter(tenant=tenant, action=AuditAction.REPROCESS, at__gt=now - policy.window)
        .order_by("-at")
        .values_list("at", flat=True)[: policy.limit]
    )
    wait = policy.retry_after(recent, now)
    if wait is not None:
        raise ReprocessRateLimitedError(tenant, wait)


def record_refusal(
    refusal: ReprocessRateLimitedError, *, dead_letter_id: int, operator: str, now: dt.datetime
) -> ReprocessRefusal:
    """Count a refused reprocess so operators and auditors can see it. Call outside the refused transaction."""
    return ReprocessRefusal.objects.create(
        at=now, tenant=refusal.tenant, operator=operator, dead_letter_id=dead_letter_id,
        retry_after_seconds=refusal.retry_after_seconds,
    )


def room(tenant: str, now: dt.datetime) -> tuple[ReprocessLimit, int]:
    """The tenant's limit and how many reprocesses fit now (a read: what a dry run tells)."""
    policy = ReprocessLimit.for_tenant(tenant)
    used = AuditEntry.objects.filter(tenant=tenant, action=AuditAction.REPROCESS, at__gt=now - policy.window).count()
    return policy, max(policy.limit - used, 0)
