"""Dead letters (a job and a classified reason) and the append-only audit of operator decisions."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from pipeline.models import Job
from pipeline.reasons import DeadLetterReason, ErrorCode


class DeadLetter(models.Model):
    """A job that failed for good. Holds a reason code and the last error code, never error text."""

    job = models.OneToOneField(Job, on_delete=models.PROTECT, related_name="dead_letter")
    tenant = models.CharField(max_length=33)
    reason_code = models.CharField(max_length=32, choices=DeadLetterReason.choices)
    error_code = models.CharField(max_length=32, choices=ErrorCode.choices, blank=True, default="")
    attempts = models.PositiveIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        permissions = [("reprocess_deadletter", "Can reprocess a dead letter as a new job version")]
        constraints = [
            models.CheckConstraint(condition=Q(reason_code__in=DeadLetterReason.values), name="deadletter_reason_valid"),
        ]
        indexes = [models.Index(fields=["tenant", "created_at"], name="deadletter_tenant_created")]

    def __str__(self) -> str:
        return f"{self.job.idempotency_key} ({self.reason_code})"


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
