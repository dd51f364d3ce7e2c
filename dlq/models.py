"""The append-only audit of operator decisions on dead letters, and the reprocesses the rate limit refused.

The dead letters themselves are pipeline rows (pipeline.models.DeadLetter), written with the job's end.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from pipeline.models import DeadLetter, Job


class AuditAction(models.TextChoices):
    REPROCESS = "reprocess"


class AuditEntry(models.Model):
    """Append-only: who did what, when, to which job, creating which job. The database refuses changes."""

    at = models.DateTimeField()
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    tenant = models.CharField(max_length=33)
    operator = models.CharField(max_length=150)  # the identity as given; kept even if the user goes
    operator_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+",
        db_constraint=False,
    )
    reason = models.CharField(max_length=500, blank=True, default="")
    dead_letter = models.OneToOneField(DeadLetter, on_delete=models.PROTECT, related_name="reprocess_audit")
    old_job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="+")
    new_job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="+")

    class Meta:
        verbose_name_plural = "audit entries"
        permissions = [("reprocess_deadletter", "Can reprocess a dead letter as a new job version")]
        ordering = ["-at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(operator=""), name="audit_operator_required"),
        ]
        indexes = [
            models.Index(fields=["tenant", "at"], name="audit_tenant_at"),
            models.Index(fields=["at", "id"], name="audit_at_id"),  # the superuser's list, newest first
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.operator} at {self.at:%Y-%m-%d %H:%M}"


class ReprocessRefusal(models.Model):
    """A reprocess the tenant's rate limit refused. Written after the refused transaction rolled back."""

    at = models.DateTimeField()
    tenant = models.CharField(max_length=33)
    operator = models.CharField(max_length=150)
    dead_letter = models.ForeignKey(DeadLetter, on_delete=models.PROTECT, related_name="reprocess_refusals")
    retry_after_seconds = models.PositiveIntegerField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "at"], name="refusal_tenant_at"),
            models.Index(fields=["at", "id"], name="refusal_at_id"),  # the superuser's list, newest first
        ]

    def __str__(self) -> str:
        return f"refused for {self.operator} at {self.at:%Y-%m-%d %H:%M}"
