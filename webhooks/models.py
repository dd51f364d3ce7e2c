"""Webhook endpoints and their deliveries.

An endpoint belongs to one tenant and receives that tenant's events on the topics it chose. Its
secret is stored encrypted (``webhooks.secrets``) and shown once, when it is made. A delivery row
records one endpoint's progress with one outbox event, so an event that several destinations receive
is retried only towards those that have not answered 2xx yet. Rows change only through
``webhooks.services`` and ``webhooks.publisher``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from pipeline.models import OutboxEvent

# The topics the outbox emits, offered when an endpoint is configured.
TOPICS = ("extraction.completed", "review.decided")


class WebhookEndpoint(models.Model):
    tenant = models.CharField(max_length=33)
    url = models.CharField(max_length=2000)
    topics = models.JSONField(default=list)  # a list of TOPICS
    secret_encrypted = models.TextField()  # a Fernet token: the secret never sits in the table in clear
    secret_hint = models.CharField(max_length=12, default="")  # its last characters, to tell secrets apart
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=150, blank=True, default="")
    secret_set_at = models.DateTimeField()

    class Meta:
        verbose_name = "webhook endpoint"
        # Roles hold no add/change permission (rows change through services): this one is the admin's.
        permissions = [("configure_webhookendpoint", "Can add and change webhook endpoints and give new secrets")]
        indexes = [models.Index(fields=["tenant", "active"], name="webhook_tenant_active")]

    def __str__(self) -> str:
        return f"{self.tenant}: {self.display_url}"

    @property
    def display_url(self) -> str:
        """The URL without its query string (which may carry a token): what lists and logs show."""
        return self.url.split("?", 1)[0].split("#", 1)[0]


class WebhookDelivery(models.Model):
    """One endpoint's delivery of one event: attempts, the last HTTP status (never a body), done or not.

    Deleted with its outbox row when the pruner removes published events."""

    event = models.ForeignKey(OutboxEvent, to_field="event_id", db_column="event_id", on_delete=models.CASCADE,
                              related_name="webhook_deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_failure = models.CharField(max_length=32, blank=True, default="")
    last_attempt_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["event", "endpoint"], name="webhook_one_delivery_per_endpoint"),
        ]
        indexes = [
            models.Index(fields=["endpoint", "id"], condition=Q(delivered_at__isnull=True),
                         name="webhook_delivery_undelivered"),
        ]

    def __str__(self) -> str:
        return f"event {self.event_id} to endpoint {self.endpoint_id}"
