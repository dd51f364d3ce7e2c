"""The incident that motivated RelayOps (a redelivered job billed twice) and the outbox, end to end on PostgreSQL with injected crashes.

Execution is at-least-once (extraction may run twice); the effect — one result, one event, one
review per idempotency key — happens once.
"""

from __future__ import annotations

import uuid

import pytest

from pipeline import queue, relay
from pipeline.consumer import ReviewHandoffConsumer
from pipeline.crash import CrashInjector
from pipeline.errors import CrashSimulated, IdempotencyConflictError, StaleLeaseError
from pipeline.events import Event
from pipeline.models import Attempt, ConsumedEvent, Job, OutboxEvent, Result, Review
from pipeline.outbox import RESULT_TOPIC, commit_result_with_event
from pipeline.relay import ConsumerPublisher
from tests.conftest import invoice
from tests.integration.conftest import one_of_each, snapshot

pytestmark = pytest.mark.django_db

LEASE = 30
KEY = "acme:inv-1:v1"


class RecordingPublisher:
    """Delivers to the real deduping consumer and remembers every delivery."""

    def __init__(self, clock) -> None:
        self.inner = ConsumerPublisher(clock)
        self.delivered: list[uuid.UUID] = []

    def publish(self, event: Event) -> None:
        self.delivered.append(event.event_id)
        self.inner.publish(event)


def test_opening_incident_crash_after_commit_then_repeated_delivery(clock, counting_extractor):
    from pipeline.worker import process_once

    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    with pytest.raises(CrashSimulated):
        process_once("w1", extractor=counting_extractor, crash=CrashInjector({"after_commit_before_ack": 1.0}),
                     lease_seconds=LEASE, clock=clock)
    # The commit carried the completion: the job is done even though the worker never acknowledged.
    job.refresh_from_db()
    assert job.status == "succeeded"
    assert one_of_each(KEY) == (1, 1, 0)
    assert OutboxEvent.objects.get().published_at is None

    # The delivery is repeated long after the lease: the document arrives again, a new worker runs.
    clock.advance(LEASE + 5)
    again, created = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    assert (again.pk, created) == (job.pk, False)
    assert process_once("w2", extractor=counting_extractor, lease_seconds=LEASE, clock=clock).outcome == "idle"
    assert relay.publish_pending(clock=clock).published == 1
    assert relay.publish_pending(clock=clock).claimed == 0
    assert one_of_each(KEY) == (1, 1, 1)
    assert counting_extractor.calls == 1
    assert list(Attempt.objects.values_list("fence", flat=True)) == [1]


def test_crash_after_extract_runs_extraction_twice_and_still_commits_once(clock, counting_extractor):
    from pipeline.worker import process_once

    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    with pytest.raises(CrashSimulated):
        process_once("w1", extractor=counting_extractor, crash=CrashInjector({"after_extract": 1.0}),
                     lease_seconds=LEASE, clock=clock)
    assert Job.objects.get(pk=job.pk).status == "leased"
    assert one_of_each(KEY) == (0, 0, 0)

    clock.advance(LEASE + 1)
    out = process_once("w2", extractor=counting_extractor, lease_seconds=LEASE, clock=clock)
    assert (out.outcome, out.job_id, out.fence) == ("committed", job.pk, 2)
    assert relay.publish_pending(clock=clock).published == 1
    assert counting_extractor.calls == 2  # at-least-once execution
    assert one_of_each(KEY) == (1, 1, 1)  # exactly-once effect
    assert Result.objects.get().fence == 2
    assert list(Attempt.objects.order_by("fence").values_list("fence", "worker", "error_code")) == [
        (1, "w1", "lease_expired"), (2, "w2", ""),
    ]


def test_relay_republish_is_absorbed_by_the_consumer(clock):
    from pipeline.worker import process_once

    queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    assert process_once("w1", clock=clock).outcome == "committed"
    publisher = RecordingPublisher(clock)
    with pytest.raises(CrashSimulated):
        relay.publish_pending(publisher=publisher, claim_seconds=30,
                              crash=CrashInjector({"after_publish_before_mark": 1.0}), clock=clock)
    event = OutboxEvent.objects.get()
    assert event.published_at is None and len(publisher.delivered) == 1 and Review.objects.count() == 1

    assert relay.publish_pending(publisher=publisher, clock=clock).claimed == 0  # its claim is still current
    clock.advance(31)
    report = relay.publish_pending(publisher=publisher, clock=clock)
    assert (report.claimed, report.published, report.lost_claims) == (1, 1, 0)
    assert publisher.delivered == [event.event_id, event.event_id]  # delivered twice ...
    assert one_of_each(KEY) == (1, 1, 1)  # ... applied once
    assert ConsumedEvent.objects.count() == 1
    event.refresh_from_db()
    assert event.published_at == clock.now() and event.publish_attempts == 2


class Down:
    def publish(self, event: Event) -> None:
        raise ConnectionError("broker down")


def test_a_relay_whose_claim_expired_mid_publish_does_not_mark_the_row(clock):
    from pipeline.worker import process_once

    class Slow:
        """Publishing outlasts the claim: meanwhile another relay claims the row (and fails to publish)."""

        def __init__(self) -> None:
            self.inner, self.second = ConsumerPublisher(clock), None

        def publish(self, event: Event) -> None:
            clock.advance(31)
            self.second = relay.publish_pending(publisher=Down(), clock=clock)
            self.inner.publish(event)

    queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    process_once("w1", clock=clock)
    slow = Slow()
    first = relay.publish_pending(publisher=slow, claim_seconds=30, clock=clock)
    assert (slow.second.claimed, slow.second.failed) == (1, 1)
    assert (first.claimed, first.published, first.lost_claims) == (1, 0, 1)  # not its claim any more
    event = OutboxEvent.objects.get()
    assert event.published_at is None and event.claim_token is None  # the second relay's failure released it
    assert event.failures == 1 and event.next_attempt_at == clock.now() + relay.FailurePolicy().backoff(1)
    clock.advance(31)
    assert relay.publish_pending(clock=clock).published == 1
    event.refresh_from_db()
    assert event.publish_attempts == 3 and event.published_at == clock.now()
    assert one_of_each(KEY) == (1, 1, 1)


def test_consumer_dedupes_a_redelivered_event_by_event_id(clock):
    from pipeline.worker import process_once

    queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    process_once("w1", clock=clock)
    row = OutboxEvent.objects.get()
    event = Event(row.event_id, row.tenant, row.topic, row.idempotency_key, row.payload, row.created_at)
    consumer = ReviewHandoffConsumer(clock)
    first, second = consumer.handle(event), consumer.handle(event)
    assert (first.applied, first.reason) == (True, "applied")
    assert (second.applied, second.reason) == (False, "duplicate_event")
    assert ConsumedEvent.objects.filter(consumer=consumer.name, event_id=row.event_id).exists()
    assert Review.objects.get().event_id == row.event_id and ConsumedEvent.objects.count() == 1


def test_a_failed_publish_stays_pending_and_is_retried(clock):
    from pipeline.worker import process_once

    queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    process_once("w1", clock=clock)
    report = relay.publish_pending(publisher=Down(), clock=clock)
    assert (report.claimed, report.published, report.failed) == (1, 0, 1)
    assert OutboxEvent.objects.get().published_at is None and Review.objects.count() == 0
    clock.advance(31)
    assert relay.publish_pending(clock=clock).published == 1
    assert one_of_each(KEY) == (1, 1, 1)


def naive_dual_write(lease: queue.Lease, fields: dict, publisher, crash) -> None:
    """The anti-pattern, deliberately: write the database, then publish, as two separate acts."""
    Result.objects.create(
        job_id=lease.job_id, tenant=lease.tenant, idempotency_key=lease.idempotency_key,
        payload_hash=lease.payload_hash, data=fields, fence=lease.fence, created_at=lease.lease_until,
    )  # "committed": no outbox row, no durable trace that an event is owed
    queue.ack(lease)
    crash("after_db_write_before_publish")
    publisher.publish(Event(uuid.uuid4(), lease.tenant, RESULT_TOPIC, lease.idempotency_key,
                            {"job_id": lease.job_id, "document_id": lease.document_id}, lease.lease_until))


def crash_here(point: str) -> None:
    raise CrashSimulated(point)


def test_naive_dual_write_loses_the_event_the_outbox_keeps_it(clock):
    from pipeline.worker import process_once

    publisher = RecordingPublisher(clock)
    queue.enqueue("acme", "naive", 1, invoice(1), clock=clock)
    queue.enqueue("acme", "outbox", 1, invoice(2), clock=clock)

    naive = queue.lease_next("w1", clock=clock)
    with pytest.raises(CrashSimulated):
        naive_dual_write(naive, {"total": "120.50"}, publisher, crash_here)
    # The result exists, the job is done, and the event is gone: nothing knows one is owed.
    assert Result.objects.filter(idempotency_key="acme:naive:v1").exists()
    assert Job.objects.get(document_id="naive").status == "succeeded"
    assert publisher.delivered == []
    assert relay.publish_pending(publisher=publisher, clock=clock).claimed == 0
    assert one_of_each("acme:naive:v1") == (1, 0, 0)

    with pytest.raises(CrashSimulated):  # the same crash, after the outbox commit
        process_once("w1", crash=CrashInjector({"after_commit_before_ack": 1.0}), clock=clock)
    assert publisher.delivered == []
    assert relay.publish_pending(publisher=publisher, clock=clock).published == 1  # a later relay process
    assert publisher.delivered == [OutboxEvent.objects.get(idempotency_key="acme:outbox:v1").event_id]
    assert one_of_each("acme:outbox:v1") == (1, 1, 1)


def reopen(job: Job, clock, **changes) -> None:
    """Bypass every guard: put a finished job back in the queue, as only a bug could."""
    Job.objects.filter(pk=job.pk).update(status="queued", finished_at=None, visible_at=clock.now(), **changes)


# The commit runs in the caller's transaction (a savepoint) or, as in the workers, in autocommit (its
# own transaction): both paths are checked.
IN_A_TRANSACTION_AND_IN_AUTOCOMMIT = pytest.mark.parametrize(
    "caller", [pytest.param("transaction", marks=pytest.mark.django_db),
               pytest.param("autocommit", marks=pytest.mark.django_db(transaction=True))])


@IN_A_TRANSACTION_AND_IN_AUTOCOMMIT
def test_commit_dedupes_on_an_existing_result_with_the_same_payload_hash(clock, caller):
    """Defence in depth: even if every other guard failed, the unique key returns the first result."""
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    first = commit_result_with_event(queue.lease_next("w1", clock=clock), {"total": "1.00"}, clock=clock)
    reopen(job, clock)
    again = commit_result_with_event(queue.lease_next("w2", clock=clock), {"total": "2.00"}, clock=clock)
    assert (first.deduped, again.deduped) == (False, True)
    assert (again.result_id, again.event_id) == (first.result_id, first.event_id)
    assert Result.objects.get().data == {"total": "1.00"}
    assert one_of_each(KEY) == (1, 1, 0)


@IN_A_TRANSACTION_AND_IN_AUTOCOMMIT
def test_commit_with_an_existing_result_of_another_payload_is_a_conflict_and_rolls_back(clock, caller):
    from django.db import connection

    assert connection.in_atomic_block == (caller == "transaction")
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    commit_result_with_event(queue.lease_next("w1", clock=clock), {"total": "1.00"}, clock=clock)
    reopen(job, clock, payload_hash="0" * 64)
    lease = queue.lease_next("w2", clock=clock)
    before = snapshot()
    with pytest.raises(IdempotencyConflictError):
        commit_result_with_event(lease, {"total": "2.00"}, clock=clock)
    assert snapshot() == before  # the completion rolled back with it: the job is still leased
    assert Job.objects.get(pk=job.pk).status == "leased"


def test_the_fence_is_checked_before_anything_is_written(clock):
    queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    old = queue.lease_next("w1", lease_seconds=LEASE, clock=clock)
    clock.advance(LEASE + 1)
    queue.lease_next("w2", lease_seconds=LEASE, clock=clock)
    with pytest.raises(StaleLeaseError):
        commit_result_with_event(old, {"total": "1.00"}, clock=clock)
    assert one_of_each(KEY) == (0, 0, 0)
