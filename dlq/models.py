"""The append-only audit of operator decisions on dead letters, and the reprocesses the rate limit refused.

The dead letters themselves are pipeline rows (pipeline.models.DeadLetter), written with the job's end.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from pipeline.models import DeadLetter, Job, Review


class AuditAction(models.TextChoices):
    """Every operator decision the audit records. Each is written through ``dlq.audit.record``."""

    REPROCESS = "reprocess"  # a dead letter became a new job version
    APPROVE = "approve"  # a review approved as extracted
    REJECT = "reject"  # a review rejected (a reason is required)
    CORRECT = "correct"  # a review approved with corrected field values
    REDELIVER = "redeliver"  # a parked outbox event sent again
    CANCEL = "cancel"  # a queued or leased job ended by an operator
    RUN_NOW = "run_now"  # a retry-waiting job made due now
    PAUSE_INTAKE = "pause_intake"  # a tenant's jobs stop being claimed
    RESUME_INTAKE = "resume_intake"
    SET_REPROCESS_LIMIT = "set_reprocess_limit"  # a tenant's reprocess rate limit changed


class AuditEntry(models.Model):
    """Append-only: who did what, when, to which job, review or event, and why. The database refuses changes.

    A reprocess names its dead letter, the old job and the new one; a review decision names its review
    and job; a live-job action names its job; an outbox redelivery names its event id. ``detail`` holds
    short facts that are never document content (a new limit, a previous status).
    """

    at = models.DateTimeField()
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    tenant = models.CharField(max_length=33)
    operator = models.CharField(max_length=150)  # the identity as given; kept even if the user goes
    operator_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+",
        db_constraint=False,
    )
    reason = models.CharField(max_length=500, blank=True, default="")
    dead_letter = models.OneToOneField(
        DeadLetter, null=True, blank=True, on_delete=models.PROTECT, related_name="reprocess_audit"
    )
    old_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    new_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_entries")
    review = models.ForeignKey(
        Review, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_entries"
    )
    event_id = models.UUIDField(null=True, blank=True)  # an outbox event's id (events are pruned; the id stays)
    detail = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        verbose_name_plural = "audit entries"
        permissions = [("reprocess_deadletter", "Can reprocess a dead letter as a new job version")]
        ordering = ["-at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(operator=""), name="audit_operator_required"),
            models.CheckConstraint(
                condition=~Q(action="reprocess")
                | Q(dead_letter__isnull=False, old_job__isnull=False, new_job__isnull=False),
                name="audit_reprocess_names_its_jobs",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "at"], name="audit_tenant_at"),
            models.Index(fields=["at", "id"], name="audit_at_id"),  # the superuser's list, newest first
            models.Index(fields=["action", "tenant", "at"], name="audit_action_tenant_at"),
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
