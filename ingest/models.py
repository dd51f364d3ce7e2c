"""API keys: one per client of a tenant. Only a hash of the key is stored; the key is shown once."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class ApiKey(models.Model):
    """A tenant's API key. The tenant of every request comes from its key, never from the body.

    Rows change only through ingest.services (created by ``create_api_key``, revoked in the admin).
    """

    tenant = models.CharField(max_length=33)
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)  # the key's public part, to recognise it in lists
    key_hash = models.CharField(max_length=64, unique=True)  # SHA-256 of the whole key
    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=150, blank=True, default="")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        verbose_name = "API key"
        permissions = [("revoke_apikey", "Can revoke an API key")]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], condition=Q(revoked_at__isnull=True),
                                    name="apikey_one_live_name_per_tenant"),
        ]
        indexes = [models.Index(fields=["tenant", "created_at"], name="apikey_tenant_created")]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None
