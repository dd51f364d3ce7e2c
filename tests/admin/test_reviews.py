"""Review decisions: the guarded service, the wait kept for metrics, the review list (no bulk decision)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import AnonymousUser
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


def test_the_list_offers_no_bulk_decision(review, acme_operator):
    """Reviews are decided one at a time on the review page, seen: the list has no approve or reject action."""
    client = login(acme_operator)
    before = snapshot()
    listed = client.get(reverse(LIST))
    assert listed.context["cl"].model_admin.get_actions(listed.wsgi_request) == {}
    response = client.post(reverse(LIST), {"action": "approve", "_selected_action": [review.pk], "post": "yes"})
    assert response.status_code == 403
    assert snapshot() == before


def test_the_list_shows_who_decided_and_the_wait(review, acme_operator):
    decide_review(review.pk, "approved", acme_operator, clock=FrozenClock(review.created_at + dt.timedelta(minutes=90)))
    listed = login(acme_operator).get(reverse(LIST)).content.decode()
    assert "olivia" in listed and "1 h 30 min" in listed  # decided_by and the wait


def test_the_queue_filters_by_status_and_tenant(review, acme_operator):
    other = factories.succeeded("acme", "invoice-2").reviews.get()
    decide_review(other.pk, "approved", acme_operator)
    client = login(acme_operator)
    pending = client.get(reverse(LIST), {"status__exact": "pending"}).context["cl"].result_list
    assert [r.pk for r in pending] == [review.pk]
    assert len(client.get(reverse(LIST), {"tenant": "acme"}).context["cl"].result_list) == 2
