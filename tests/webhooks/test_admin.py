"""Webhooks in the admin: endpoints per tenant with the secret shown once, and parked outbox events shown
with their last HTTP status and redelivered by an operator, audited."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.admin.models import ADDITION, LogEntry
from django.test import override_settings
from django.urls import reverse

from dlq.models import AuditAction, AuditEntry
from pipeline import queue, relay
from pipeline.events import Event, PublishError
from pipeline.models import OutboxEvent, Review
from pipeline.worker import process_once
from tests.admin.conftest import acme_operator, auditor, globex_operator, login, roles  # noqa: F401 (fixtures)
from tests.conftest import invoice
from webhooks import secrets, services
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db
ADD = "admin:webhooks_webhookendpoint_add"
OUTBOX = "admin:pipeline_outboxevent_changelist"
URL = "http://127.0.0.1:9/hooks/in?token=query-secret"


def relayops(**options) -> override_settings:
    return override_settings(RELAYOPS={**settings.RELAYOPS, **options})


class Refusing:
    def publish(self, event: Event) -> None:
        raise PublishError("http_status", 503)


def parked_event(tenant: str, n: int = 1) -> OutboxEvent:
    job, _ = queue.enqueue(tenant, f"doc-{n}", 1, invoice(n))
    assert process_once("w-test").job_id == job.pk
    with relayops(OUTBOX_MAX_FAILURES=1):
        assert relay.publish_pending(publisher=Refusing()).parked == 1
    return OutboxEvent.objects.get(idempotency_key=job.idempotency_key)


def add_post(**fields) -> dict:
    return {"tenant": "acme", "url": URL, "topics": ["extraction.completed"], "active": "on", **fields}


def test_an_operator_adds_an_endpoint_and_sees_its_secret_once(acme_operator):
    client = login(acme_operator)
    response = client.post(reverse(ADD), add_post())
    endpoint = WebhookEndpoint.objects.get()
    secret = secrets.decrypt(endpoint.secret_encrypted)
    assert response.status_code == 200 and secret in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    assert (endpoint.tenant, endpoint.url, endpoint.topics, endpoint.created_by) == (
        "acme", URL, ["extraction.completed"], "olivia")
    assert LogEntry.objects.filter(action_flag=ADDITION, object_id=str(endpoint.pk)).exists()
    change = client.get(reverse("admin:webhooks_webhookendpoint_change", args=[endpoint.pk])).content.decode()
    listing = client.get(reverse("admin:webhooks_webhookendpoint_changelist")).content.decode()
    for page in (change, listing):
        assert secret not in page and secret[:-4] not in page
    assert endpoint.secret_hint in change and "query-secret" not in listing


def test_a_new_secret_is_shown_once_and_the_old_one_stops_signing(acme_operator):
    made = services.create_endpoint("acme", URL, ["extraction.completed"])
    client = login(acme_operator)
    post = {"action": "give_new_secret", "_selected_action": [made.endpoint.pk]}
    assert "Give new secrets" in client.post(reverse("admin:webhooks_webhookendpoint_changelist"), post).content.decode()
    shown = client.post(reverse("admin:webhooks_webhookendpoint_changelist"), {**post, "post": "yes"}).content.decode()
    renewed = secrets.decrypt(WebhookEndpoint.objects.get().secret_encrypted)
    assert renewed != made.secret and renewed in shown and made.secret not in shown


@pytest.mark.parametrize(("fields", "says"), [
    ({"tenant": "globex"}, "Select a valid choice"),
    ({"url": "http://169.254.169.254/latest/meta-data/"}, "link-local or cloud metadata"),
    ({"url": "ftp://127.0.0.1/"}, "only http and https"),
    ({"topics": []}, "This field is required"),
])
def test_a_refused_endpoint_is_a_form_error_and_writes_nothing(acme_operator, fields, says):
    response = login(acme_operator).post(reverse(ADD), add_post(**fields))
    assert response.status_code == 200 and says in response.content.decode()
    assert WebhookEndpoint.objects.count() == 0


def test_auditors_see_endpoints_but_cannot_add_or_change_them(auditor):
    endpoint = services.create_endpoint("acme", URL, ["extraction.completed"]).endpoint
    client = login(auditor)
    assert client.get(reverse("admin:webhooks_webhookendpoint_changelist")).status_code == 200
    assert client.get(reverse(ADD)).status_code == 403
    assert client.post(reverse(ADD), add_post()).status_code == 403
    url = reverse("admin:webhooks_webhookendpoint_change", args=[endpoint.pk])
    assert client.post(url, add_post(url="http://127.0.0.1:10/")).status_code == 403
    assert WebhookEndpoint.objects.get().url == URL


def test_another_tenants_endpoint_is_a_404(globex_operator):
    endpoint = services.create_endpoint("acme", URL, ["extraction.completed"]).endpoint
    client = login(globex_operator)
    assert client.get(reverse("admin:webhooks_webhookendpoint_change", args=[endpoint.pk])).status_code == 404
    listing = client.get(reverse("admin:webhooks_webhookendpoint_changelist")).content.decode()
    assert "127.0.0.1" not in listing


def test_a_parked_event_shows_its_last_status_and_is_redelivered_audited(acme_operator):
    event = parked_event("acme")
    client = login(acme_operator)
    listing = client.get(reverse(OUTBOX), {"state": "parked"})
    assert [e.pk for e in listing.context["cl"].result_list] == [event.pk]
    assert "http_status (HTTP 503)" in listing.content.decode()
    job_id = event.payload["job_id"]
    timeline = client.get(reverse("admin:pipeline_job_timeline", args=[job_id])).content.decode()
    assert "Event parked" in timeline and "after 1 failed publication (last: http_status, last HTTP 503)" in timeline
    post = {"action": "redeliver", "_selected_action": [event.pk]}
    assert "Redeliver parked events" in client.post(reverse(OUTBOX), post).content.decode()
    client.post(reverse(OUTBOX), {**post, "post": "yes", "reason": "receiver fixed"})
    event.refresh_from_db()
    assert not event.parked and (event.failures, event.publish_attempts, event.next_attempt_at) == (0, 0, None)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.event_id, entry.tenant, entry.operator, entry.reason) == (
        AuditAction.REDELIVER, event.event_id, "acme", "olivia", "receiver fixed")
    assert "HTTP 503" in entry.detail and entry.job.idempotency_key == event.idempotency_key
    timeline = client.get(reverse("admin:pipeline_job_timeline", args=[entry.job_id])).content.decode()
    assert "by olivia" in timeline and "receiver fixed" in timeline
    assert relay.publish_pending().published == 1 and Review.objects.count() == 1


def test_redelivering_an_event_that_is_not_parked_changes_nothing(acme_operator):
    job, _ = queue.enqueue("acme", "doc-1", 1, invoice(1))
    process_once("w-test")
    event = OutboxEvent.objects.get()
    response = login(acme_operator).post(
        reverse(OUTBOX), {"action": "redeliver", "_selected_action": [event.pk], "post": "yes", "reason": ""},
        follow=True)
    assert "not parked" in response.content.decode() and AuditEntry.objects.count() == 0


def test_another_tenants_operator_and_an_auditor_cannot_redeliver(globex_operator, auditor):
    event = parked_event("acme")
    post = {"action": "redeliver", "_selected_action": [event.pk], "post": "yes", "reason": "x"}
    login(globex_operator).post(reverse(OUTBOX), post)
    assert login(auditor).post(reverse(OUTBOX), post).status_code == 403
    event.refresh_from_db()
    assert event.parked and AuditEntry.objects.count() == 0


def test_a_redelivery_without_an_operator_is_refused():
    from relayops.errors import InvalidInputError

    event = parked_event("acme")
    with pytest.raises(InvalidInputError):
        services.redeliver_parked(event, operator="")
    event.refresh_from_db()
    assert event.parked and AuditEntry.objects.count() == 0


def test_an_operator_changes_an_endpoint_through_the_same_checks(acme_operator):
    endpoint = services.create_endpoint("acme", URL, ["extraction.completed"]).endpoint
    token = endpoint.secret_encrypted
    client = login(acme_operator)
    change = reverse("admin:webhooks_webhookendpoint_change", args=[endpoint.pk])
    refused = client.post(change, {"url": "http://[fd00:ec2::254]/", "topics": ["extraction.completed"]})
    assert refused.status_code == 200 and "link-local or cloud metadata" in refused.content.decode()
    assert WebhookEndpoint.objects.get().url == URL
    client.post(change, {"url": "http://127.0.0.1:10/new", "topics": ["extraction.completed", "review.decided"]})
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.topics, endpoint.active) == (
        "http://127.0.0.1:10/new", ["extraction.completed", "review.decided"], False)
    assert endpoint.secret_encrypted == token and endpoint.tenant == "acme"  # neither changes here
