"""Bad input to every public function is a typed InvalidInputError (a ValueError)
naming the argument, and nothing is written."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from dlq.services import reprocess_from_dlq
from pipeline import queue, relay
from pipeline.errors import InvalidInputError, PermanentError
from pipeline.idempotency import build_idempotency_key
from pipeline.outbox import commit_result_with_event
from pipeline.reasons import ErrorCode
from tests.conftest import invoice
from tests.integration.conftest import snapshot

pytestmark = pytest.mark.django_db

NAIVE = dt.datetime(2026, 3, 1, 12, 0)
LONG_TENANT = "a" + "b" * 32


@pytest.fixture
def world(clock):
    """A leased job, a pending outbox event and a dead letter: something for every call to damage."""
    from pipeline.models import DeadLetter
    from pipeline.worker import process_once

    queue.enqueue("acme", "done", 1, invoice(1), clock=clock)
    process_once("w0", clock=clock)
    queue.enqueue("acme", "dead", 1, invoice(2), clock=clock)
    queue.nack(queue.lease_next("w0", clock=clock), PermanentError(ErrorCode.SCHEMA_INVALID), clock=clock)
    queue.enqueue("acme", "held", 1, invoice(3), clock=clock)
    lease = queue.lease_next("w0", clock=clock)
    return {"lease": lease, "dead_letter": DeadLetter.objects.get().pk, "clock": clock}


def enqueue(**overrides):
    def call(world):
        args = {"tenant_id": "acme", "document_id": "new", "operation_version": 1, "payload": invoice(9)}
        args.update(overrides)
        kwargs = {name: args.pop(name) for name in ("max_attempts", "deadline") if name in args}
        queue.enqueue(*args.values(), clock=world["clock"], **kwargs)

    return call


CASES = {
    # enqueue
    "enqueue-tenant-none": (enqueue(tenant_id=None), "tenant_id"),
    "enqueue-tenant-upper": (enqueue(tenant_id="Acme"), "tenant_id"),
    "enqueue-tenant-empty": (enqueue(tenant_id=""), "tenant_id"),
    "enqueue-document-empty": (enqueue(document_id=""), "document_id"),
    "enqueue-document-int": (enqueue(document_id=7), "document_id"),
    "enqueue-document-long": (enqueue(document_id="x" * 256), "document_id"),
    "enqueue-document-nul": (enqueue(document_id="doc\x00"), "document_id"),
    "enqueue-version-zero": (enqueue(operation_version=0), "operation_version"),
    "enqueue-version-bool": (enqueue(operation_version=True), "operation_version"),
    "enqueue-version-str": (enqueue(operation_version="1"), "operation_version"),
    "enqueue-version-too-big": (enqueue(operation_version=2**31), "operation_version"),
    "enqueue-key-too-long": (
        enqueue(tenant_id=LONG_TENANT, document_id="x" * 255, operation_version=2**31 - 1), "idempotency_key",
    ),
    "enqueue-payload-set": (enqueue(payload={"text": {1, 2}}), "payload"),
    "enqueue-payload-nan": (enqueue(payload={"total": math.nan}), "payload"),
    "enqueue-payload-object": (enqueue(payload=object()), "payload"),
    "enqueue-max-attempts-zero": (enqueue(max_attempts=0), "max_attempts"),
    "enqueue-max-attempts-huge": (enqueue(max_attempts=101), "max_attempts"),
    "enqueue-max-attempts-bool": (enqueue(max_attempts=True), "max_attempts"),
    "enqueue-max-attempts-str": (enqueue(max_attempts="3"), "max_attempts"),
    "enqueue-deadline-naive": (enqueue(deadline=NAIVE), "deadline"),
    "enqueue-deadline-past": (enqueue(deadline=dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)), "deadline"),
    "enqueue-deadline-zero": (enqueue(deadline=dt.timedelta(0)), "deadline"),
    "enqueue-deadline-negative": (enqueue(deadline=dt.timedelta(seconds=-5)), "deadline"),
    "enqueue-deadline-str": (enqueue(deadline="1h"), "deadline"),
    "enqueue-deadline-number": (enqueue(deadline=3600), "deadline"),
    # lease_next
    "lease-worker-empty": (lambda w: queue.lease_next("", clock=w["clock"]), "worker_id"),
    "lease-worker-none": (lambda w: queue.lease_next(None, clock=w["clock"]), "worker_id"),
    "lease-worker-long": (lambda w: queue.lease_next("w" * 201, clock=w["clock"]), "worker_id"),
    "lease-worker-nul": (lambda w: queue.lease_next("w\x00", clock=w["clock"]), "worker_id"),
    "lease-seconds-zero": (lambda w: queue.lease_next("w1", lease_seconds=0, clock=w["clock"]), "lease_seconds"),
    "lease-seconds-negative": (lambda w: queue.lease_next("w1", lease_seconds=-1, clock=w["clock"]), "lease_seconds"),
    "lease-seconds-bool": (lambda w: queue.lease_next("w1", lease_seconds=True, clock=w["clock"]), "lease_seconds"),
    "lease-seconds-str": (lambda w: queue.lease_next("w1", lease_seconds="30", clock=w["clock"]), "lease_seconds"),
    "lease-seconds-nan": (lambda w: queue.lease_next("w1", lease_seconds=math.nan, clock=w["clock"]), "lease_seconds"),
    "lease-seconds-day+1": (lambda w: queue.lease_next("w1", lease_seconds=86401, clock=w["clock"]), "lease_seconds"),
    # heartbeat, ack, nack
    "heartbeat-lease-none": (lambda w: queue.heartbeat(None, clock=w["clock"]), "lease"),
    "heartbeat-lease-dict": (lambda w: queue.heartbeat(dict(w["lease"].__dict__), clock=w["clock"]), "lease"),
    "heartbeat-seconds": (lambda w: queue.heartbeat(w["lease"], lease_seconds=0, clock=w["clock"]), "lease_seconds"),
    "heartbeat-many-none": (lambda w: queue.heartbeat_many(None), "extensions"),
    "heartbeat-many-lease": (lambda w: queue.heartbeat_many([w["lease"]]), "extensions"),
    "heartbeat-many-lease-none": (lambda w: queue.heartbeat_many([(None, w["clock"].now())]), "lease"),
    "heartbeat-many-naive": (lambda w: queue.heartbeat_many([(w["lease"], NAIVE)]), "lease_until"),
    "heartbeat-many-str": (
        lambda w: queue.heartbeat_many([(w["lease"], w["clock"].now().isoformat())]), "lease_until",
    ),
    "ack-lease-none": (lambda w: queue.ack(None, clock=w["clock"]), "lease"),
    "ack-lease-id": (lambda w: queue.ack(w["lease"].job_id, clock=w["clock"]), "lease"),
    "nack-lease-none": (lambda w: queue.nack(None, ValueError(), clock=w["clock"]), "lease"),
    "nack-error-str": (lambda w: queue.nack(w["lease"], "boom", clock=w["clock"]), "error"),
    "nack-error-none": (lambda w: queue.nack(w["lease"], None, clock=w["clock"]), "error"),
    "nack-error-class": (lambda w: queue.nack(w["lease"], ValueError, clock=w["clock"]), "error"),
    "nack-policy": (lambda w: queue.nack(w["lease"], ValueError(), policy="fast", clock=w["clock"]), "policy"),
    # commit_result_with_event
    "commit-lease-none": (lambda w: commit_result_with_event(None, {"a": 1}, clock=w["clock"]), "lease"),
    "commit-result-set": (lambda w: commit_result_with_event(w["lease"], {"a": {1}}, clock=w["clock"]), "result"),
    "commit-result-nan": (lambda w: commit_result_with_event(w["lease"], math.nan, clock=w["clock"]), "result"),
    "commit-topic-empty": (lambda w: commit_result_with_event(w["lease"], {}, topic="", clock=w["clock"]), "topic"),
    "commit-topic-none": (lambda w: commit_result_with_event(w["lease"], {}, topic=None, clock=w["clock"]), "topic"),
    "commit-topic-long": (
        lambda w: commit_result_with_event(w["lease"], {}, topic="t" * 65, clock=w["clock"]), "topic",
    ),
    "commit-topic-int": (lambda w: commit_result_with_event(w["lease"], {}, topic=5, clock=w["clock"]), "topic"),
    # publish_pending
    "publish-batch-zero": (lambda w: relay.publish_pending(0, clock=w["clock"]), "batch_size"),
    "publish-batch-huge": (lambda w: relay.publish_pending(10_001, clock=w["clock"]), "batch_size"),
    "publish-batch-bool": (lambda w: relay.publish_pending(True, clock=w["clock"]), "batch_size"),
    "publish-batch-str": (lambda w: relay.publish_pending("5", clock=w["clock"]), "batch_size"),
    "publish-claim-zero": (lambda w: relay.publish_pending(claim_seconds=0, clock=w["clock"]), "claim_seconds"),
    "publish-claim-long": (lambda w: relay.publish_pending(claim_seconds=3601, clock=w["clock"]), "claim_seconds"),
    "publish-claim-str": (lambda w: relay.publish_pending(claim_seconds="30", clock=w["clock"]), "claim_seconds"),
    "publish-claim-bool": (lambda w: relay.publish_pending(claim_seconds=True, clock=w["clock"]), "claim_seconds"),
    "publish-publisher": (lambda w: relay.publish_pending(publisher=object(), clock=w["clock"]), "publisher"),
    # reprocess_from_dlq
    "reprocess-id-str": (
        lambda w: reprocess_from_dlq(str(w["dead_letter"]), "ops", clock=w["clock"]), "dead_letter_id",
    ),
    "reprocess-id-none": (lambda w: reprocess_from_dlq(None, "ops", clock=w["clock"]), "dead_letter_id"),
    "reprocess-id-bool": (lambda w: reprocess_from_dlq(True, "ops", clock=w["clock"]), "dead_letter_id"),
    "reprocess-operator-none": (lambda w: reprocess_from_dlq(w["dead_letter"], None, clock=w["clock"]), "operator"),
    "reprocess-operator-blank": (lambda w: reprocess_from_dlq(w["dead_letter"], " ", clock=w["clock"]), "operator"),
    "reprocess-reason-int": (
        lambda w: reprocess_from_dlq(w["dead_letter"], "ops", reason=5, clock=w["clock"]), "reason",
    ),
    "reprocess-reason-long": (
        lambda w: reprocess_from_dlq(w["dead_letter"], "ops", reason="r" * 501, clock=w["clock"]), "reason",
    ),
    "reprocess-reason-nul": (
        lambda w: reprocess_from_dlq(w["dead_letter"], "ops", reason="fixed\x00", clock=w["clock"]), "reason",
    ),
    # build_idempotency_key (the full table is in tests/unit)
    "key-tenant": (lambda w: build_idempotency_key("", "doc", 1), "tenant_id"),
    "key-version-bool": (lambda w: build_idempotency_key("acme", "doc", True), "operation_version"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_a_typed_error_and_writes_nothing(world, case):
    call, field = CASES[case]
    before = snapshot()
    with pytest.raises(ValueError) as info:
        call(world)
    assert isinstance(info.value, InvalidInputError), repr(info.value)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert snapshot() == before
