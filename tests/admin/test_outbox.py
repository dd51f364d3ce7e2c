"""Outbox events in the admin: read-only, pending/published filter, the oldest pending event's age on top."""

from __future__ import annotations

import pytest
from django.urls import reverse

from pipeline.models import OutboxEvent
from tests.admin import factories
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db
LIST = "admin:pipeline_outboxevent_changelist"


def test_pending_and_published_filter_and_oldest_pending_age(acme_operator):
    published = factories.succeeded("acme", "doc-1", clock=factories.ago(days=1))
    pending_old = factories.succeeded("acme", "doc-2", publish=False, clock=factories.ago(minutes=42))
    factories.succeeded("acme", "doc-3", publish=False)
    factories.succeeded("globex", "doc-9", publish=False, clock=factories.ago(hours=5))  # not acme's
    client = login(acme_operator)
    response = client.get(reverse(LIST))
    assert "Oldest pending event: <strong>42 min</strong> old." in response.content.decode()
    pending = client.get(reverse(LIST), {"state": "pending"}).context["cl"].result_list
    assert [e.idempotency_key for e in pending] == ["acme:doc-3:v1", pending_old.idempotency_key]
    done = client.get(reverse(LIST), {"state": "published"}).context["cl"].result_list
    assert [e.idempotency_key for e in done] == [published.idempotency_key]


def test_no_pending_events_says_so(acme_operator):
    factories.succeeded("acme", "doc-1")
    assert "No pending events." in login(acme_operator).get(reverse(LIST)).content.decode()


def test_the_event_page_shows_no_payload(acme_operator):
    factories.succeeded("acme", "doc-1")
    event = OutboxEvent.objects.get()
    html = login(acme_operator).get(reverse("admin:pipeline_outboxevent_change", args=[event.pk])).content.decode()
    assert str(event.event_id) in html
    assert "Payload" not in html and '"job_id"' not in html
