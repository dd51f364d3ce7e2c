"""Key and payload dedupe at enqueue, and tenants sharing a document id never colliding."""

from __future__ import annotations

import pytest

from pipeline import queue, relay
from pipeline.errors import IdempotencyConflictError
from pipeline.models import Job, Result, Review
from pipeline.worker import process_once
from tests.conftest import invoice
from tests.integration.conftest import row_counts, snapshot

pytestmark = pytest.mark.django_db


def test_same_key_same_payload_returns_the_existing_job(clock):
    first, created = queue.enqueue("acme", "doc-1", 1, {"text": "x", "meta": {"a": 1, "b": 2}}, clock=clock)
    assert created
    before = snapshot()
    clock.advance(60)
    again, created_again = queue.enqueue("acme", "doc-1", 1, {"meta": {"b": 2, "a": 1}, "text": "x"}, clock=clock)
    assert (again.pk, created_again) == (first.pk, False)
    assert snapshot() == before


def test_same_key_other_payload_is_a_conflict_and_writes_nothing(clock):
    queue.enqueue("acme", "doc-1", 1, invoice(total="10.00"), clock=clock)
    before = snapshot()
    with pytest.raises(IdempotencyConflictError) as info:
        queue.enqueue("acme", "doc-1", 1, invoice(total="99.00"), clock=clock)
    assert info.value.key == "acme:doc-1:v1"
    assert snapshot() == before


def test_a_new_operation_version_is_a_new_job(clock):
    one, _ = queue.enqueue("acme", "doc-1", 1, invoice(total="10.00"), clock=clock)
    two, created = queue.enqueue("acme", "doc-1", 2, invoice(total="99.00"), clock=clock)
    assert created and one.pk != two.pk
    assert sorted(Job.objects.values_list("idempotency_key", flat=True)) == ["acme:doc-1:v1", "acme:doc-1:v2"]


def test_tenants_sharing_a_document_id_never_collide(clock):
    acme, created_a = queue.enqueue("acme", "inv-7", 1, invoice(n=1, total="10.00"), clock=clock)
    globex, created_g = queue.enqueue("globex", "inv-7", 1, invoice(n=2, total="20.00"), clock=clock)
    assert created_a and created_g  # a different payload under the same document id is no conflict
    assert (acme.idempotency_key, globex.idempotency_key) == ("acme:inv-7:v1", "globex:inv-7:v1")

    assert process_once("w1", clock=clock).outcome == "committed"
    assert process_once("w1", clock=clock).outcome == "committed"
    assert relay.publish_pending(clock=clock).published == 2

    results = {r.tenant: (r.idempotency_key, r.data["total"], r.job_id) for r in Result.objects.all()}
    assert results == {"acme": ("acme:inv-7:v1", "10.00", acme.pk), "globex": ("globex:inv-7:v1", "20.00", globex.pk)}
    reviews = {r.tenant: (r.idempotency_key, r.job_id) for r in Review.objects.all()}
    assert reviews == {"acme": ("acme:inv-7:v1", acme.pk), "globex": ("globex:inv-7:v1", globex.pk)}
    assert row_counts()["OutboxEvent"] == 2
