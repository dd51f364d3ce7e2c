"""Memberships: a user sees and acts on the rows of the tenants they are a member of, and no others."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Membership(models.Model):
    """One user in one tenant. Superusers need none: they see every tenant."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.CharField(max_length=33)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_user_tenant")]
        indexes = [models.Index(fields=["tenant"], name="membership_tenant")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.tenant}"


class TenantControl(models.Model):
    """What an operator set for one tenant: its intake paused or not, and its reprocess rate limit.

    A tenant without a row runs with the defaults: intake open, the limit from the settings
    (``RELAYOPS_REPROCESS_LIMIT``, 20 per hour). Written only by the ``controls`` services, each
    change audited. The worker's claim skips the jobs of a paused tenant (``pipeline.sql.CLAIMABLE``
    reads the partial index of paused rows, empty while nothing is paused).
    """

    tenant = models.CharField(max_length=33, unique=True)
    intake_paused = models.BooleanField(default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    # Reprocesses per window (RELAYOPS_REPROCESS_WINDOW_SECONDS, an hour by default); None: the setting's.
    reprocess_limit = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        permissions = [
            ("cancel_job", "Can cancel a queued or leased job"),
            ("run_job_now", "Can run a delayed job now"),
            ("pause_intake", "Can pause and resume a tenant's intake"),
            ("set_reprocess_limit", "Can change a tenant's reprocess rate limit"),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(intake_paused=False) | models.Q(paused_at__isnull=False),
                                   name="tenantcontrol_paused_has_time"),
            models.CheckConstraint(condition=models.Q(reprocess_limit__isnull=True) | models.Q(reprocess_limit__gte=1),
                                   name="tenantcontrol_limit_positive"),
        ]
        indexes = [
            models.Index(fields=["tenant"], condition=models.Q(intake_paused=True), name="tenantcontrol_paused"),
        ]

    def __str__(self) -> str:
        return self.tenant
