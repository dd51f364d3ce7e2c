"""The webhook publisher the relay runs (``RELAYOPS_PUBLISHERS`` lists it by default).

For each event, every active endpoint of the event's tenant subscribed to its topic gets one signed
POST, unless its delivery row says it already answered 2xx. If any endpoint failed, the publisher
raises ``PublishError`` with the last failure's status: the relay then backs the event off (and parks
it after ``RELAYOPS_OUTBOX_MAX_FAILURES``), and the next attempt goes only to the endpoints still
owed the event. Delivery is at-least-once per endpoint: a crash between an endpoint's 2xx and its
delivery row repeats the POST, and the receiver dedupes by the ``RelayOps-Event-Id`` header.

The HTTP client (httpx, and the delivery module that uses it) is made at the first delivery: every
drain builds a publisher at start-up, and a node whose tenants have no endpoint never loads it.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import F, Value
from django.db.models.functions import Coalesce

from pipeline.clock import Clock, system_clock
from pipeline.events import BatchOutcome, Event, PublishError
from relayops.logging import get_logger
from webhooks import targets
from webhooks.checks import check_timeout
from webhooks.models import WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    import httpx

    from webhooks.delivery import Outcome

log = get_logger(__name__)


class WebhookPublisher:
    # Read by the relay's claim with each event (pipeline.events.Publisher): whether its tenant has an
    # active endpoint. A batch of which no event's tenant has one costs no statement more.
    claim_facts = {
        "webhook_endpoints": f"EXISTS (SELECT 1 FROM {WebhookEndpoint._meta.db_table} endpoint "
                             "WHERE endpoint.tenant = {event}.tenant AND endpoint.active)",
    }
    # When it has anything to do with an event (pipeline.events.Publisher): the same fact. A commit whose
    # tenant has no active endpoint hands its event to review itself, and no relay pass is needed for it.
    wants = claim_facts["webhook_endpoints"]

    def __init__(self, clock: Clock = system_clock, *, timeout: float | None = None,
                 policy: targets.Policy | None = None, verify: ssl.SSLContext | bool = True) -> None:
        self.clock = clock
        self.timeout = check_timeout(settings.RELAYOPS["WEBHOOK_TIMEOUT_SECONDS"] if timeout is None else timeout)
        self.policy = policy
        self.verify = verify
        self._client: httpx.Client | None = None

    @property
    def client(self) -> httpx.Client:
        """The HTTP client, made at the first delivery. No keep-alive: each POST goes to its own checked
        address, and a publisher (one per drain) never leaves a pooled connection behind when dropped."""
        if self._client is None:
            import httpx

            self._client = httpx.Client(timeout=self.timeout, follow_redirects=False, trust_env=False,
                                        verify=self.verify, limits=httpx.Limits(max_keepalive_connections=0))
        return self._client

    def destinations(self, event: Event, endpoints: list[WebhookEndpoint] | None = None) -> list[WebhookEndpoint]:
        """The endpoints still owed ``event``: active, the event's tenant and topic, no 2xx yet (among
        ``endpoints``, the tenant's active ones already read, when given)."""
        if endpoints is None:
            if event.claim_facts.get("webhook_endpoints") is False:  # the relay's claim saw none
                return []
            endpoints = list(WebhookEndpoint.objects.filter(tenant=event.tenant, active=True).order_by("pk"))
        endpoints = [e for e in endpoints if e.tenant == event.tenant and event.topic in e.topics]
        if not endpoints:
            return []
        done = set(WebhookDelivery.objects.filter(event__event_id=event.event_id, delivered_at__isnull=False)
                   .values_list("endpoint_id", flat=True))
        return [e for e in endpoints if e.pk not in done]

    def publish(self, event: Event) -> None:
        self._deliver(event, self.destinations(event))

    def publish_batch(self, events: Sequence[Event], out_of_time: Callable[[], bool]) -> BatchOutcome:
        """The batch's endpoints in one read; then each event that has any, one by one, as ``publish``
        (an event with no endpoint costs nothing more). Stops once out of time."""
        outcome = BatchOutcome()
        if all(event.claim_facts.get("webhook_endpoints") is False for event in events):
            return outcome  # the relay's claim saw no active endpoint for any of their tenants
        tenants = {event.tenant for event in events}
        endpoints = list(WebhookEndpoint.objects.filter(tenant__in=tenants, active=True).order_by("pk"))
        for index, event in enumerate(events):
            if not any(e.tenant == event.tenant and event.topic in e.topics for e in endpoints):
                continue
            if out_of_time():
                outcome.untried |= {later.event_id for later in events[index:]}
                break
            try:
                self._deliver(event, self.destinations(event, endpoints))
            except Exception as exc:  # the relay records it on the event: backoff, then parking
                outcome.failed[event.event_id] = exc
        return outcome

    def _deliver(self, event: Event, owed: list[WebhookEndpoint]) -> None:
        from webhooks import delivery  # with httpx, at the first delivery (the module's docstring)

        failed: Outcome | None = None
        for endpoint in owed:
            now = self.clock.now()
            outcome = delivery.post(self.client, endpoint, event, timestamp=int(now.timestamp()), policy=self.policy)
            self._record(event, endpoint, outcome)
            log.info("webhook.delivery", endpoint_id=endpoint.pk, event_id=str(event.event_id), ok=outcome.ok,
                     status=outcome.status, outcome=outcome.code)
            if not outcome.ok:
                failed = outcome
        if failed is not None:
            raise PublishError(failed.code, failed.status)

    def _record(self, event: Event, endpoint: WebhookEndpoint, outcome: Outcome) -> None:
        now = self.clock.now()
        row, _ = WebhookDelivery.objects.get_or_create(  # the foreign key holds OutboxEvent.event_id (to_field)
            event_id=event.event_id, endpoint=endpoint, defaults={"last_attempt_at": now},  # type: ignore[misc]
        )
        WebhookDelivery.objects.filter(pk=row.pk).update(
            attempts=F("attempts") + 1, last_status=outcome.status, last_attempt_at=now,
            last_failure="" if outcome.ok else outcome.code,
            delivered_at=Coalesce("delivered_at", Value(now)) if outcome.ok else F("delivered_at"),
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
