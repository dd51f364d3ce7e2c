"""Webhook delivery through the relay's own code path (``relay.publish_pending`` with the configured
publishers, as every drain runs it) to real receivers on loopback that verify the signature and dedupe
by event id."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.conf import settings
from django.test import override_settings

from dlq.models import AuditAction, AuditEntry
from pipeline import queue, relay
from pipeline.maintenance.pruner import OutboxPruner
from pipeline.models import ConsumedEvent, OutboxEvent, Review
from pipeline.plugins import configured_publisher
from pipeline.worker import process_once
from tests.conftest import invoice
from tests.waiting import wait_for
from webhooks import services
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db
TOPIC = "extraction.completed"


def relayops(**options) -> override_settings:
    return override_settings(RELAYOPS={**settings.RELAYOPS, **options})


def committed(tenant: str, n: int, clock) -> OutboxEvent:
    job, _ = queue.enqueue(tenant, f"doc-{n}", 1, invoice(n), clock=clock)
    assert process_once("w-test", clock=clock).job_id == job.pk
    return OutboxEvent.objects.get(idempotency_key=job.idempotency_key)


def endpoint_for(receiver, tenant: str = "acme"):
    made = services.create_endpoint(tenant, receiver.url, [TOPIC], by="olivia")
    receiver.knows(made.secret)
    return made.endpoint


def relay_once(clock):
    return relay.publish_pending(publisher=configured_publisher(), clock=clock)


def test_every_event_arrives_once_signed_with_its_id_topic_and_timestamp(receivers, clock):
    receiver = receivers()
    endpoint_for(receiver)
    events = [committed("acme", n, clock) for n in range(5)]
    foreign = committed("globex", 9, clock)  # globex has no endpoint: nothing is posted for it
    report = relay_once(clock)
    assert (report.claimed, report.published, report.failed) == (6, 6, 0)
    log = receiver.log()
    assert sorted(entry["event_id"] for entry in log) == sorted(str(e.event_id) for e in events)
    assert all(entry["valid"] and entry["status"] == 200 and not entry["duplicate"] for entry in log)
    assert all(entry["topic"] == TOPIC and entry["timestamp"].isdigit() for entry in log)
    first = next(entry["document"] for entry in log if entry["event_id"] == str(events[0].event_id))
    assert first["topic"] == TOPIC and first["tenant"] == "acme" and first["data"]["document_id"] == "doc-0"
    assert sorted(receiver.applied()) == sorted(str(e.event_id) for e in events)
    assert str(foreign.event_id) not in receiver.applied()
    assert OutboxEvent.objects.unpublished().count() == 0 and Review.objects.count() == 6
    assert WebhookDelivery.objects.filter(delivered_at__isnull=False, last_status=200).count() == 5


def test_a_receiver_answering_500_twice_gets_the_event_on_the_third_try_after_backoff(receivers, clock):
    receiver = receivers("--fail-first", "2")
    endpoint_for(receiver)
    event = committed("acme", 1, clock)
    assert relay_once(clock).failed == 1
    event.refresh_from_db()
    assert (event.failures, event.last_status, event.last_failure) == (1, 500, "http_status")
    assert event.next_attempt_at == clock.now() + relay.FailurePolicy().backoff(1) and event.published_at is None
    assert relay_once(clock).claimed == 0  # backing off: not claimed before its time
    clock.advance(10)
    assert relay_once(clock).failed == 1
    event.refresh_from_db()
    assert event.failures == 2 and event.next_attempt_at == clock.now() + relay.FailurePolicy().backoff(2)
    clock.advance(19)
    assert relay_once(clock).claimed == 0
    clock.advance(1)
    assert relay_once(clock).published == 1
    assert [entry["status"] for entry in receiver.log()] == [500, 500, 200]
    assert receiver.applied() == [str(event.event_id)]
    event.refresh_from_db()
    assert event.published_at == clock.now() and event.parked_at is None
    assert (Review.objects.count(), ConsumedEvent.objects.count()) == (1, 1)  # the consumer applied it once


def test_one_failing_endpoint_is_retried_alone(receivers, clock):
    good, bad = receivers(), receivers("--status", "503")
    endpoint_for(good)
    endpoint_for(bad)
    event = committed("acme", 1, clock)
    for _ in range(3):
        assert relay_once(clock).failed == 1
        clock.advance(3600)
    assert len(good.log()) == 1 and len(bad.log()) == 3  # the good endpoint is not called again
    assert [e["status"] for e in bad.log()] == [503, 503, 503]
    assert (Review.objects.count(), ConsumedEvent.objects.count()) == (1, 1)
    event.refresh_from_db()
    assert (event.failures, event.last_status, event.published_at) == (3, 503, None)


def test_after_the_last_allowed_failure_the_event_is_parked_and_no_longer_tried(receivers, clock):
    receiver = receivers("--status", "502")
    endpoint_for(receiver)
    event = committed("acme", 1, clock)
    with relayops(OUTBOX_MAX_FAILURES=3):
        reports = []
        for _ in range(3):
            reports.append(relay_once(clock))
            clock.advance(3600)
        assert [r.parked for r in reports] == [0, 0, 1]
        clock.advance(86_400)
        assert relay_once(clock).claimed == 0
    event.refresh_from_db()
    assert event.parked and event.parked_at is not None and (event.failures, event.last_status) == (3, 502)
    assert OutboxEvent.objects.parked().get() == event and OutboxEvent.objects.pending(clock.now()).count() == 0
    assert len(receiver.log()) == 3
    receiver.kill()
    receiver.start()  # fixed: answers 200 now
    assert services.redeliver_parked(event, operator="olivia", reason="receiver fixed", clock=clock)
    assert relay_once(clock).published == 1
    assert receiver.applied() == [str(event.event_id)]
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.event_id, entry.operator) == (AuditAction.REDELIVER, event.event_id, "olivia")
    assert not services.redeliver_parked(event, operator="olivia", clock=clock)  # published: nothing to redeliver
    assert AuditEntry.objects.count() == 1


def test_published_events_are_pruned_with_their_deliveries(receivers, clock):
    receiver = receivers()
    endpoint_for(receiver)
    committed("acme", 1, clock)
    relay_once(clock)
    assert WebhookDelivery.objects.count() == 1
    pruned = OutboxPruner(dt.timedelta(days=7)).run_once(clock.now() + dt.timedelta(days=8))
    assert pruned == 1 and OutboxEvent.objects.count() == 0 and WebhookDelivery.objects.count() == 0


def test_a_receiver_killed_mid_delivery_gets_the_event_again_and_dedupes_it(receivers, clock):
    receiver = receivers("--hang-after-apply")
    endpoint_for(receiver)
    event = committed("acme", 1, clock)

    def kill_once_applied() -> None:  # the receiver applied the event; it dies before it answers
        wait_for(lambda: receiver.log(), timeout=60, what="the receiver to apply the event and log it")
        receiver.kill()

    killer = threading.Thread(target=kill_once_applied)
    killer.start()
    report = relay_once(clock)
    killer.join(timeout=60)
    assert report.failed == 1
    event.refresh_from_db()
    assert (event.failures, event.last_failure, event.last_status) == (1, "connection", None)
    receiver.start()  # back, on the same port, remembering what it applied
    clock.advance(10)
    assert relay_once(clock).published == 1
    assert [(e["status"], e["duplicate"]) for e in receiver.log()] == [(200, False), (200, True)]
    assert receiver.applied() == [str(event.event_id)]  # delivered twice, applied once
    assert (Review.objects.count(), ConsumedEvent.objects.count()) == (1, 1)


def test_a_wrong_secret_is_detected_by_the_receiver(receivers, clock):
    receiver = receivers()
    endpoint_for(receiver)
    receiver.knows("whsec_not-the-endpoints-secret")
    event = committed("acme", 1, clock)
    assert relay_once(clock).failed == 1
    [entry] = receiver.log()
    assert (entry["valid"], entry["status"], entry["event_id"]) == (False, 401, str(event.event_id))
    assert receiver.applied() == []
    event.refresh_from_db()
    assert (event.last_status, event.published_at) == (401, None)


def test_a_receiver_that_never_answers_times_out(receivers, clock):
    receiver = receivers("--hang")
    endpoint_for(receiver)
    event = committed("acme", 1, clock)
    with relayops(WEBHOOK_TIMEOUT_SECONDS=0.5):
        assert relay_once(clock).failed == 1
    event.refresh_from_db()
    assert (event.last_failure, event.last_status) == ("timeout", None)


def test_the_response_body_is_never_stored(receivers, clock):
    receiver = receivers("--status", "500")
    endpoint_for(receiver)
    committed("acme", 1, clock)
    relay_once(clock)
    rows = [*OutboxEvent.objects.values(), *WebhookDelivery.objects.values()]
    assert rows and "receiver-private-words" not in repr(rows)


def test_an_endpoint_of_another_topic_or_an_inactive_one_gets_nothing(receivers, clock):
    other_topic, inactive = receivers(), receivers()
    made = services.create_endpoint("acme", other_topic.url, ["review.decided"])
    other_topic.knows(made.secret)
    off = endpoint_for(inactive)
    services.change_endpoint(off, url=off.url, topics=off.topics, active=False)
    committed("acme", 1, clock)
    assert relay_once(clock).published == 1
    assert other_topic.log() == [] and inactive.log() == []


def test_a_target_refused_at_delivery_time_is_a_failure_without_a_request(receivers, clock):
    receiver = receivers()
    endpoint_for(receiver)  # allowed when it was made (the test settings allow loopback) ...
    event = committed("acme", 1, clock)
    with relayops(WEBHOOK_ALLOW_PRIVATE=False):  # ... and refused since
        assert relay_once(clock).failed == 1
    assert receiver.log() == []
    event.refresh_from_db()
    assert (event.last_failure, event.last_status) == ("refused_target", None)


def test_a_batch_of_slow_publications_gives_back_what_it_had_no_time_to_try(clock):
    events = [committed("acme", n, clock) for n in range(3)]
    ticks = iter([0.0, 1.0, 16.0, 16.0])  # the claim is 30 s: after the first event, half of it has passed

    class OneByOne:  # a publisher of one event at a time (as a webhook is), delivering to the review consumer
        def publish(self, event) -> None:
            relay.ConsumerPublisher(clock).publish(event)

    report = relay.publish_pending(publisher=OneByOne(), clock=clock, claim_seconds=30, monotonic=lambda: next(ticks))
    assert (report.claimed, report.published, report.released, report.failed) == (3, 1, 2, 0)
    rest = OutboxEvent.objects.filter(pk__in=[e.pk for e in events[1:]])
    assert all(e.claim_token is None and e.publish_attempts == 0 for e in rest)  # untried: not counted
    assert relay.publish_pending(clock=clock).published == 2  # taken at once by the next relay


def test_an_idle_drain_wakes_when_a_backoff_ends(receivers, clock):
    from pipeline.runtime.drain import Drain

    receiver = receivers("--status", "500")
    endpoint_for(receiver)
    committed("acme", 1, clock)
    relay_once(clock)  # failed: backing off for 10 s
    drain = Drain("node:1", max_seconds=5, jobs=False, poll_seconds=60, clock=clock)
    assert drain._seconds_until_due(clock.now()) == 10.0
    clock.advance(4)
    assert drain._seconds_until_due(clock.now()) == 6.0
    OutboxEvent.objects.update(parked_at=clock.now())  # parked: nothing to wake up for
    assert drain._seconds_until_due(clock.now()) == 60.0


def test_a_host_that_stopped_resolving_is_a_dns_failure(receivers, clock):
    from webhooks.models import WebhookEndpoint

    receiver = receivers()
    endpoint_for(receiver)
    WebhookEndpoint.objects.update(url="http://gone.invalid/hook")  # its DNS name was deleted since
    event = committed("acme", 1, clock)
    assert relay_once(clock).failed == 1
    event.refresh_from_db()
    assert (event.last_failure, event.last_status) == ("dns", None) and receiver.log() == []
