"""Every change to webhook endpoints, and the operator's redelivery of a parked outbox event.

``create_endpoint`` and ``new_secret`` return the secret in clear exactly once, for the caller to show;
only its Fernet token is stored. ``redeliver_parked`` gives a parked event back to the relay through
its owner (``pipeline.relay.redeliver``) and records who asked in the audit, in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from dlq import audit
from dlq.models import AuditAction
from pipeline import relay
from pipeline.clock import Clock, system_clock
from pipeline.models import Job, OutboxEvent
from relayops.errors import InvalidInputError
from tenancy.names import validate_tenant
from webhooks import secrets, targets
from webhooks.models import TOPICS, WebhookEndpoint


@dataclass(frozen=True)
class NewSecret:
    endpoint: WebhookEndpoint
    secret: str  # shown once, never stored in clear


def check_topics(topics: object) -> list[str]:
    if isinstance(topics, str) or not isinstance(topics, Iterable):
        raise InvalidInputError("topics", "must be a list of topics")
    chosen = list(dict.fromkeys(topics))
    if not chosen or any(topic not in TOPICS for topic in chosen):
        raise InvalidInputError("topics", f"choose at least one of {', '.join(TOPICS)}")
    return chosen


def create_endpoint(tenant: str, url: str, topics: Iterable[str], *, by: str = "", active: bool = True,
                    clock: Clock = system_clock) -> NewSecret:
    """A new endpoint with a generated secret; the URL is checked (``webhooks.targets``) first."""
    tenant = validate_tenant(tenant)
    targets.check(url)
    chosen = check_topics(topics)
    secret = secrets.generate()
    now = clock.now()
    endpoint = WebhookEndpoint.objects.create(
        tenant=tenant, url=url.strip(), topics=chosen, secret_encrypted=secrets.encrypt(secret),
        secret_hint=secrets.hint(secret), active=bool(active), created_at=now, created_by=by[:150],
        secret_set_at=now,
    )
    return NewSecret(endpoint=endpoint, secret=secret)


def change_endpoint(endpoint: WebhookEndpoint, *, url: str, topics: Iterable[str], active: bool) -> WebhookEndpoint:
    targets.check(url)
    chosen = check_topics(topics)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url=url.strip(), topics=chosen, active=bool(active))
    endpoint.refresh_from_db()
    return endpoint


def new_secret(endpoint: WebhookEndpoint, *, clock: Clock = system_clock) -> NewSecret:
    """Replace an endpoint's secret (it was lost, or leaked); the old one stops signing at once."""
    secret = secrets.generate()
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        secret_encrypted=secrets.encrypt(secret), secret_hint=secrets.hint(secret), secret_set_at=clock.now(),
    )
    endpoint.refresh_from_db()
    return NewSecret(endpoint=endpoint, secret=secret)


def reencrypt_secrets() -> tuple[int, list[int]]:
    """Re-encrypt every endpoint's secret under the current first key; returns (re-encrypted, unreadable ids)."""
    done, unreadable = 0, []
    for endpoint in WebhookEndpoint.objects.order_by("pk"):
        try:
            token = secrets.reencrypt(endpoint.secret_encrypted)
        except secrets.SecretUnreadableError:
            unreadable.append(endpoint.pk)
            continue
        done += WebhookEndpoint.objects.filter(pk=endpoint.pk, secret_encrypted=endpoint.secret_encrypted).update(
            secret_encrypted=token)
    return done, unreadable


def _job_id(event: OutboxEvent) -> int | None:
    """The job an event came from (its payload names it), so the redelivery shows on its timeline."""
    job_id = event.payload.get("job_id") if isinstance(event.payload, dict) else None
    return job_id if isinstance(job_id, int) and not isinstance(job_id, bool) else None


def redeliver_parked(event: OutboxEvent, *, operator: object, reason: str = "",
                     clock: Clock = system_clock) -> bool:
    """Give a parked event back to the relay, audited; False (nothing written) if it is not parked."""
    audit.operator_identity(operator)  # refuse a missing operator before anything changes
    with transaction.atomic():
        redelivered = relay.redeliver(event.pk, clock=clock)
        if redelivered is None:
            return False
        job_id = _job_id(redelivered)
        job = Job.objects.filter(pk=job_id, tenant=redelivered.tenant).first() if job_id is not None else None
        audit.record(AuditAction.REDELIVER, at=clock.now(), tenant=redelivered.tenant, operator=operator,
                     reason=reason, event_id=redelivered.event_id, job=job,
                     detail=f"{redelivered.topic} after {redelivered.last_failure or 'interruptions'}"
                            + (f" (HTTP {redelivered.last_status})" if redelivered.last_status else ""))
    return True
