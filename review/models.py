"""A review's decision: one per review, final, kept apart from the extractor's result.

An approval is recorded as it is; a rejection with its reason; a correction with the final field
values (``corrected``) and what the reviewer changed (``diff``: each changed field's path with its
extracted and corrected value). The stored ``Result`` is never changed: the extractor's output and
the human's changes stay apart. The database refuses UPDATE and DELETE (migration 0002).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from pipeline.models import Review


class Decision(models.TextChoices):
    APPROVE = "approve", "Approved"  # as extracted
    REJECT = "reject", "Rejected"  # a reason is required
    CORRECT = "correct", "Corrected and approved"  # approved with corrected values


class ReviewDecision(models.Model):
    review = models.OneToOneField(Review, on_delete=models.PROTECT, related_name="decision")
    tenant = models.CharField(max_length=33)
    decision = models.CharField(max_length=16, choices=Decision.choices)
    corrected = models.JSONField(null=True, blank=True)  # the final field values of a correction
    diff = models.JSONField(default=list, blank=True)  # [{"field", "extracted", "corrected"}] of a correction
    reason = models.CharField(max_length=500, blank=True, default="")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField()

    class Meta:
        permissions = [
            ("view_document_content", "Can see a document's text and extracted fields on the review page"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(decision__in=Decision.values), name="review_decision_valid"),
            models.CheckConstraint(condition=~Q(decision=Decision.REJECT) | ~Q(reason=""),
                                   name="review_decision_reject_has_reason"),
            models.CheckConstraint(
                condition=Q(decision=Decision.CORRECT, corrected__isnull=False)
                | (~Q(decision=Decision.CORRECT) & Q(corrected__isnull=True)),
                name="review_decision_corrected_iff_correct",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "decided_at"], name="review_decision_tenant_at")]

    def __str__(self) -> str:
        return f"{self.decision} of review {self.review_id}"

    @property
    def final(self) -> bool:
        return self.decision != Decision.REJECT

    @property
    def corrected_fields(self) -> list[str]:
        """The paths of the fields the reviewer changed (names only, never values)."""
        return [change["field"] for change in self.diff or []]
