"""Review decisions: the guarded service, the wait kept for metrics, the admin's approve/reject."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import get_messages
from django.urls import reverse

from pipeline.clock import FrozenClock
from pipeline.errors import InvalidInputError
from pipeline.models import Review
from pipeline.reviews import decide_review, with_wait
from tests.admin import factories
from tests.admin.conftest import login
from tests.admin.factories import snapshot

pytestmark = pytest.mark.django_db
LIST = "admin:pipeline_review_changelist"


@pytest.fixture
def review() -> Review:
    return factories.succeeded("acme", "invoice-1", clock=factories.ago(minutes=90)).reviews.get()


def test_a_decision_lands_once_and_records_who_and_when(review, acme_operator, globex_operator):
    clock = FrozenClock(review.created_at + dt.timedelta(minutes=45))
    assert decide_review(review.pk, "approved", acme_operator, clock=clock) is True
    assert decide_review(review.pk, "rejected", globex_operator, clock=clock) is False  # the first stands
    review.refresh_from_db()
    assert (review.status, review.decided_by_id, review.decided_at) == ("approved", acme_operator.pk, clock.now())


def test_the_wait_from_handoff_to_decision_is_kept(review, acme_operator):
    clock = FrozenClock(review.created_at + dt.timedelta(minutes=45))
    decide_review(review.pk, "rejected", acme_operator, clock=clock)
    assert with_wait(Review.objects.all()).get().wait == dt.timedelta(minutes=45)


@pytest.mark.parametrize("decision, user, field", [
    ("pending", "operator", "decision"),
    ("maybe", "operator", "decision"),
    ("approved", "anonymous", "decided_by"),
    ("approved", "a string", "decided_by"),
])
def test_bad_decisions_are_refused(review, acme_operator, decision, user, field):
    who = {"operator": acme_operator, "anonymous": AnonymousUser()}.get(user, user)
    with pytest.raises(InvalidInputError) as refused:
        decide_review(review.pk, decision, who)
    assert refused.value.field == field
    review.refresh_from_db()
    assert review.status == "pending"


def decide(client, action: str, *ids, post: str = "yes"):
    data = {"action": action, "_selected_action": list(ids), "post": post}
    if not post:
        data["index"] = "0"
    return client.post(reverse(LIST), data, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.mark.parametrize("action, status", [("approve", "approved"), ("reject", "rejected")])
def test_the_admin_asks_then_decides(review, acme_operator, action, status):
    client = login(acme_operator)
    before = snapshot()
    asked = decide(client, action, review.pk, post="")
    assert "admin/pipeline/review/decide_confirmation.html" in [t.name for t in asked.templates]
    assert "acme:invoice-1:v1" in asked.content.decode()
    assert snapshot() == before
    done = decide(client, action, review.pk)
    assert messages_of(done) == [f"{status.capitalize()} 1 review."]
    review.refresh_from_db()
    assert (review.status, review.decided_by_id) == (status, acme_operator.pk)
    listed = client.get(reverse(LIST)).content.decode()
    assert "olivia" in listed and "1 h 30 min" in listed  # decided_by and the wait


def test_a_decided_review_keeps_its_decision(review, acme_operator):
    client = login(acme_operator)
    decide(client, "approve", review.pk)
    response = decide(client, "reject", review.pk)
    assert messages_of(response) == ["Nothing was done: 1 review was already decided and kept its decision."]
    review.refresh_from_db()
    assert review.status == "approved"


def test_the_queue_filters_by_status_and_tenant(review, acme_operator):
    other = factories.succeeded("acme", "invoice-2").reviews.get()
    decide_review(other.pk, "approved", acme_operator)
    client = login(acme_operator)
    pending = client.get(reverse(LIST), {"status__exact": "pending"}).context["cl"].result_list
    assert [r.pk for r in pending] == [review.pk]
    assert len(client.get(reverse(LIST), {"tenant": "acme"}).context["cl"].result_list) == 2
