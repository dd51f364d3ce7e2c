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
