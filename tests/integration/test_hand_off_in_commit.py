"""A commit that hands its event to the review consumer in its own transaction (``hand_off``): the result,
the event, its pending review and the event's publication land together or not at all, and only when no
other publisher wants the event; otherwise the event waits for the relay exactly as before."""

from __future__ import annotations

import pytest

from pipeline import queue, relay
from pipeline.consumer import REVIEW_CONSUMER
from pipeline.errors import IdempotencyConflictError, StaleLeaseError
from pipeline.models import ConsumedEvent, Job, OutboxEvent, Result, Review
from pipeline.outbox import HandOff, commit_result_with_event
from pipeline.plugins import FanoutPublisher, configured_publisher, load_publishers
from pipeline.relay import ConsumerPublisher, commit_hand_off
from tests.conftest import invoice

pytestmark = pytest.mark.django_db(transaction=True)

FIELDS = {"invoice_number": "INV-1", "total": "1.00"}
HAND_OFF = HandOff(REVIEW_CONSUMER)


def leased(clock, document: str = "inv-1", tenant: str = "acme") -> queue.Lease:
    queue.enqueue(tenant, document, 1, invoice(), clock=clock)
    lease = queue.lease_next("w1", clock=clock)
    assert lease is not None and lease.document_id == document
    return lease


def pending_events() -> int:
    return OutboxEvent.objects.filter(published_at__isnull=True).count()


def test_a_handed_off_commit_writes_the_review_and_publishes_its_event_in_its_transaction(clock):
    lease = leased(clock)
    outcome = commit_result_with_event(lease, FIELDS, clock=clock, hand_off=HAND_OFF)
    assert outcome.handed_off and not outcome.deduped
    event = OutboxEvent.objects.get()
    review = Review.objects.get()
    assert (event.event_id, event.published_at, event.publish_attempts, event.claim_token) == (
        outcome.event_id, clock.now(), 1, None)
    assert (review.event_id, review.job_id, review.tenant, review.document_id, review.idempotency_key,
            review.status) == (event.event_id, lease.job_id, "acme", "inv-1", lease.idempotency_key, "pending")
    consumed = ConsumedEvent.objects.get()
    assert (consumed.consumer, consumed.event_id) == (REVIEW_CONSUMER, event.event_id)
    assert Job.objects.get().status == "succeeded" and Result.objects.count() == 1
    report = relay.publish_pending(clock=clock)  # nothing is left for a relay: no second review
    assert (report.claimed, Review.objects.count()) == (0, 1)


def test_without_hand_off_the_event_waits_for_the_relay_as_before(clock):
    outcome = commit_result_with_event(leased(clock), FIELDS, clock=clock)
    assert not outcome.handed_off and pending_events() == 1 and not Review.objects.exists()
    assert relay.publish_pending(clock=clock).published == 1 and Review.objects.count() == 1


def test_a_stale_commit_hands_nothing_off(clock):
    lease = leased(clock)
    commit_result_with_event(lease, FIELDS, clock=clock)  # its event pending, for the relay
    with pytest.raises(StaleLeaseError):  # the lease is done
        commit_result_with_event(lease, FIELDS, clock=clock, hand_off=HAND_OFF)
    assert (pending_events(), Review.objects.count(), ConsumedEvent.objects.count()) == (1, 0, 0)


def test_a_deduped_commit_hands_nothing_off(clock):
    """The key's result is there with this payload hash (the same input, committed before): the commit
    writes no event, so it has none to hand off."""
    lease = leased(clock)
    Result.objects.create(job_id=lease.job_id, tenant="acme", idempotency_key=lease.idempotency_key,
                          payload_hash=lease.payload_hash, data=FIELDS, fence=0, created_at=clock.now())
    outcome = commit_result_with_event(lease, FIELDS, clock=clock, hand_off=HAND_OFF)
    assert outcome.deduped and not outcome.handed_off
    assert (OutboxEvent.objects.count(), Review.objects.count(), ConsumedEvent.objects.count()) == (0, 0, 0)


def test_a_conflicting_result_rolls_the_hand_off_back_with_the_commit(clock):
    lease = leased(clock)
    Result.objects.create(job_id=lease.job_id, tenant="acme", idempotency_key=lease.idempotency_key,
                          payload_hash="another", data={}, fence=0, created_at=clock.now())
    with pytest.raises(IdempotencyConflictError):
        commit_result_with_event(lease, FIELDS, clock=clock, hand_off=HAND_OFF)
    assert (OutboxEvent.objects.count(), Review.objects.count(), ConsumedEvent.objects.count()) == (0, 0, 0)
    assert Job.objects.get().status == "leased"


def test_a_key_that_already_has_a_review_leaves_the_event_to_the_relay_and_writes_no_second(clock):
    """A review kept past its job (retention removed the job, the same key came back): no second review,
    no consumed row, the event pending for the relay, where it fails visibly as it always did."""
    lease = leased(clock)
    Review.objects.create(tenant="acme", document_id="inv-1", idempotency_key=lease.idempotency_key,
                          event_id="00000000-0000-4000-8000-000000000001", job_id=lease.job_id,
                          created_at=clock.now())
    outcome = commit_result_with_event(lease, FIELDS, clock=clock, hand_off=HAND_OFF)
    assert not outcome.handed_off and outcome.result_id == Result.objects.get().pk
    assert (pending_events(), Review.objects.count(), ConsumedEvent.objects.count()) == (1, 1, 0)


def test_an_event_the_bypass_left_behind_is_not_handed_off_and_no_review_is_left_dangling(clock):
    """An event for the key without a result (only code bypassing the commit writes one): the commit
    returns that event, and the review it began for its own event is undone."""
    lease = leased(clock)
    OutboxEvent.objects.create(event_id="00000000-0000-4000-8000-000000000002", tenant="acme",
                               topic="extraction.completed", idempotency_key=lease.idempotency_key,
                               payload={"job_id": lease.job_id, "document_id": "inv-1"}, created_at=clock.now())
    outcome = commit_result_with_event(lease, FIELDS, clock=clock, hand_off=HAND_OFF)
    assert not outcome.handed_off and str(outcome.event_id) == "00000000-0000-4000-8000-000000000002"
    assert (pending_events(), Review.objects.count(), ConsumedEvent.objects.count()) == (1, 0, 0)


def test_another_topic_is_not_the_review_consumer_s(clock):
    outcome = commit_result_with_event(leased(clock), FIELDS, topic="custom.topic", clock=clock, hand_off=HAND_OFF)
    assert not outcome.handed_off and pending_events() == 1 and not Review.objects.exists()


def test_a_commit_that_claims_the_next_job_hands_off_in_the_same_call(clock):
    lease = leased(clock, "inv-1")
    queue.enqueue("acme", "inv-2", 1, invoice(2), clock=clock)
    outcome = commit_result_with_event(lease, FIELDS, clock=clock, hand_off=HAND_OFF,
                                       claim_next=queue.claim_params("w1", clock=clock))
    assert outcome.handed_off and outcome.claimed is not None
    assert queue.take_claimed(outcome.claimed).document_id == "inv-2"
    assert Review.objects.get().document_id == "inv-1" and pending_events() == 0


@pytest.mark.parametrize("endpoint_tenant, handed_off", [("acme", False), ("globex", True)])
def test_the_default_publishers_hand_off_only_what_no_webhook_endpoint_wants(clock, endpoint_tenant, handed_off):
    """RELAYOPS_PUBLISHERS' default (review-handoff, then webhooks): a tenant with an active endpoint has its
    events published by the relay (the review consumer first, then the POST); another's are handed off."""
    from webhooks import services

    services.create_endpoint(endpoint_tenant, "http://127.0.0.1:9/hooks/in", ["review.decided"])
    hand_off = commit_hand_off(configured_publisher())
    assert hand_off is not None and hand_off.consumer == REVIEW_CONSUMER
    outcome = commit_result_with_event(leased(clock), FIELDS, clock=clock, hand_off=hand_off)
    assert outcome.handed_off is handed_off
    assert (pending_events(), Review.objects.count()) == ((0, 1) if handed_off else (1, 0))


def test_an_endpoint_made_inactive_no_longer_keeps_events_from_the_hand_off(clock):
    from webhooks import services
    from webhooks.models import WebhookEndpoint

    services.create_endpoint("acme", "http://127.0.0.1:9/hooks/in", ["extraction.completed"])
    WebhookEndpoint.objects.update(active=False)
    outcome = commit_result_with_event(leased(clock), FIELDS, clock=clock,
                                       hand_off=commit_hand_off(configured_publisher()))
    assert outcome.handed_off


class Silent:
    """A publisher that says nothing of what it wants."""

    def publish(self, event) -> None:
        pass


class Particular(Silent):
    wants = "{event}.tenant = 'globex'"


def test_which_publishers_let_a_commit_hand_off():
    assert commit_hand_off(None) == HandOff(REVIEW_CONSUMER)  # the relay's default: the consumer alone
    assert commit_hand_off(ConsumerPublisher()) == HandOff(REVIEW_CONSUMER)
    assert commit_hand_off(Silent()) is None  # the consumer is not first
    assert commit_hand_off(FanoutPublisher([Silent(), ConsumerPublisher()])) is None
    assert commit_hand_off(FanoutPublisher([ConsumerPublisher(), Silent()])) is None  # it takes every event
    assert commit_hand_off(FanoutPublisher([ConsumerPublisher(), Particular()])) == HandOff(
        REVIEW_CONSUMER, "NOT ({event}.tenant = 'globex')")
    both = commit_hand_off(FanoutPublisher([ConsumerPublisher(), Particular(), Particular()]))
    assert both == HandOff(REVIEW_CONSUMER, "NOT (({event}.tenant = 'globex') OR ({event}.tenant = 'globex'))")
    assert commit_hand_off(FanoutPublisher([ConsumerPublisher(), Particular(), Silent()])) is None
    assert commit_hand_off(load_publishers(["review-handoff", "webhooks.publisher.WebhookPublisher"])) is not None


@pytest.mark.parametrize("tenant, handed_off", [("acme", True), ("globex", False)])
def test_a_publisher_s_wants_is_read_in_the_commit_for_the_event_s_tenant(clock, tenant, handed_off):
    hand_off = commit_hand_off(FanoutPublisher([ConsumerPublisher(), Particular()]))
    outcome = commit_result_with_event(leased(clock, tenant=tenant), FIELDS, clock=clock, hand_off=hand_off)
    assert outcome.handed_off is handed_off


class Broken(Silent):
    wants = "{event}.no_such_column = 1"  # fails in the database


class Unformattable(Silent):
    wants = "{no_such_placeholder}"  # fails before it


@pytest.mark.parametrize("publisher, refused", [(Broken, "commit.extras_failed"),
                                               (Unformattable, "relay.hand_off_refused")])
def test_a_publisher_s_wants_that_fails_costs_the_job_nothing_and_its_event_goes_through_the_relay(
        clock, publisher, refused, caplog):
    """What a caller adds to the commit is not the job's: should it fail, the commit runs alone. A
    ``wants`` that does not even format is refused once, when the drain asks, not at every commit."""
    hand_off = commit_hand_off(FanoutPublisher([ConsumerPublisher(), publisher()]))
    assert (hand_off is None) is (publisher is Unformattable)
    outcome = commit_result_with_event(leased(clock), FIELDS, clock=clock, hand_off=hand_off)
    assert not outcome.handed_off and Job.objects.get().status == "succeeded"
    assert (pending_events(), Review.objects.count()) == (1, 0)
    assert refused in caplog.text
    assert relay.publish_pending(clock=clock).published == 1 and Review.objects.count() == 1


class Louder(Particular):
    """Delivers every event its own way: the ``wants`` it inherits does not speak for it."""

    def publish(self, event) -> None:
        pass


class Batching(Particular):
    def publish_batch(self, events, out_of_time):
        pass


class Said(Silent):
    def __init__(self) -> None:
        self.wants = "{event}.tenant = 'initech'"


def test_a_subclass_that_publishes_its_own_way_does_not_inherit_what_its_parent_wants():
    def condition(publisher):
        hand_off = commit_hand_off(FanoutPublisher([ConsumerPublisher(), publisher]))
        return hand_off and hand_off.when

    assert condition(Particular()) == "NOT ({event}.tenant = 'globex')"  # declared below Silent's publish
    assert condition(Louder()) is None and condition(Batching()) is None
    assert condition(Said()) == "NOT ({event}.tenant = 'initech')"  # the instance says it

    class Quieter(Louder):
        wants = "false"

    assert condition(Quieter()) == "NOT (false)"



def test_what_a_commit_reads_for_its_caller_comes_back_with_it_and_a_read_of_no_row_loses_nothing(clock):
    outcome = commit_result_with_event(leased(clock), FIELDS, clock=clock, hand_off=HAND_OFF,
                                       also_read="SELECT 7 AS also_seven")
    assert outcome.read == {"also_seven": 7} and outcome.handed_off
    second = commit_result_with_event(leased(clock, "inv-2"), FIELDS, clock=clock, hand_off=HAND_OFF,
                                      also_read="SELECT 7 AS also_seven WHERE false")
    assert second.read == {"also_seven": None} and second.handed_off
    assert (Result.objects.count(), Review.objects.count(), pending_events()) == (2, 2, 0)
