"""Maintenance loops, run once on data placed in time: retention pruners, liveness, sweeper, checks."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from pipeline import queue
from pipeline.runtime import liveness
from pipeline.checks import cluster_timing, retention_windows
from pipeline.models import ConsumedEvent, Job, OutboxEvent, QueueDepthSample
from pipeline.maintenance.pruner import Batches, ConsumerMemoryPruner, OutboxPruner, check_retention
from pipeline.maintenance.sampler import DepthSampler
from pipeline.maintenance.sweeper import Sweeper
from tests.conftest import invoice

pytestmark = pytest.mark.django_db
DAY = dt.timedelta(days=1)


def event(now: dt.datetime, *, published_days_ago: float | None, key: str) -> OutboxEvent:
    published = None if published_days_ago is None else now - published_days_ago * DAY
    return OutboxEvent.objects.create(tenant="acme", topic="t", idempotency_key=key, payload={},
                                      created_at=now - 30 * DAY, published_at=published)


def test_the_outbox_pruner_deletes_old_published_rows_in_bounded_batches(clock):
    now = clock.now()
    for n in range(5):
        event(now, published_days_ago=8, key=f"old-{n}")
    event(now, published_days_ago=6, key="recent")
    event(now, published_days_ago=None, key="pending")
    pruner = OutboxPruner(7 * DAY, Batches(size=2, max_per_run=2))
    assert pruner.run_once(now) == 4  # two batches of two, then the next run
    assert pruner.run_once(now) == 1
    assert set(OutboxEvent.objects.values_list("idempotency_key", flat=True)) == {"recent", "pending"}


def test_the_consumer_forgets_old_ids_but_never_one_still_pending_in_the_outbox(clock):
    now = clock.now()
    pending = event(now, published_days_ago=None, key="pending")
    old, young = uuid.uuid4(), uuid.uuid4()
    for event_id, age in ((old, 31), (pending.event_id, 31), (young, 29)):
        ConsumedEvent.objects.create(consumer="review-handoff", event_id=event_id, consumed_at=now - age * DAY)
    assert ConsumerMemoryPruner(30 * DAY).run_once(now) == 1
    assert set(ConsumedEvent.objects.values_list("event_id", flat=True)) == {pending.event_id, young}


def test_retention_shorter_than_the_outbox_window_is_refused():
    with pytest.raises(ImproperlyConfigured, match="CONSUMER_DEDUPE_RETENTION_DAYS"):
        check_retention(7, 3)
    with override_settings(RELAYOPS={**settings.RELAYOPS, "CONSUMER_DEDUPE_RETENTION_DAYS": 3.0}):
        assert [e.id for e in retention_windows()] == ["relayops.E001"]
    assert retention_windows() == []


def test_cluster_timing_is_checked():
    assert cluster_timing() == []
    with override_settings(Q_CLUSTER={**settings.Q_CLUSTER, "timeout": 30, "retry": 20}):
        assert {e.id for e in cluster_timing()} == {"relayops.E003", "relayops.E004"}


def test_health_needs_a_live_drain_and_progress_on_due_work(clock):
    now = clock.now()
    assess = lambda: liveness.assess(now, node="n1", stale_seconds=120)  # noqa: E731
    assert not assess().healthy  # no drain ever looked
    liveness.record_presence("n1:10", now - dt.timedelta(seconds=5), progress=False)
    assert assess().healthy
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    Job.objects.filter(pk=job.pk).update(visible_at=now - dt.timedelta(minutes=5))  # due for 5 minutes
    health = assess()
    assert not health.healthy and "no drain on node n1 made progress" in health.reason
    liveness.record_presence("n1:10", now, progress=True)
    assert assess().healthy


@pytest.mark.django_db(transaction=True)  # mark_gone writes on a connection of its own
def test_a_node_whose_drains_are_gone_is_unhealthy_until_one_looks_for_work_again(clock):
    now = clock.now()
    liveness.record_presence("n1:10", now - dt.timedelta(seconds=2), progress=True)
    liveness.record_presence("n1:11", now - dt.timedelta(seconds=2), progress=False)
    assert liveness.assess(now, node="n1", stale_seconds=120).healthy
    liveness.mark_gone("n1:10", now - dt.timedelta(seconds=1))
    assert liveness.assess(now, node="n1", stale_seconds=120).healthy  # one drain of n1 still looks
    liveness.mark_gone("n1:11", now - dt.timedelta(seconds=1))
    health = liveness.assess(now, node="n1", stale_seconds=120)
    assert (health.healthy, health.reason) == (False, "node n1 stopped 1 s ago (its drains said so)")
    liveness.record_presence("n1:11", now, progress=False)  # the same worker id back: live again
    assert liveness.assess(now, node="n1", stale_seconds=120).healthy


def test_the_sampler_records_depth_per_tenant(clock):
    now = clock.now()
    queue.enqueue("acme", "a", 1, invoice(1), clock=clock)
    queue.enqueue("globex", "b", 1, invoice(2), clock=clock)
    assert DepthSampler(7 * DAY).run_once(now) == 2
    acme = QueueDepthSample.objects.get(tenant="acme")
    assert (acme.queued, acme.due, acme.oldest_due_seconds) == (1, 1, 0.0)


def test_a_sweep_reports_counts(clock):
    queue.enqueue("acme", "a", 1, invoice(1), clock=clock)
    report = Sweeper.from_settings().run_once(clock.now())
    assert report.samples == 1
    assert (report.dead_lettered, report.outbox_pruned, report.memory_pruned) == (0, 0, 0)
