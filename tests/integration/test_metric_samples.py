"""The sampled measures (throughput by outcome, dead letters by reason, outbox lag, reprocess refusals,
drains alive per node): written each sweep, drawn over time, pruned after their retention."""

from __future__ import annotations

import datetime as dt

import pytest

from dlq.models import ReprocessRefusal
from pipeline import queue
from pipeline.maintenance.pruner import Batches, SamplePruner
from pipeline.maintenance.sampler import MetricSampler
from pipeline.maintenance.sweeper import Sweeper
from pipeline.models import DeadLetter, Metric, MetricSample
from pipeline.runtime import liveness
from pipeline.worker import process_once
from relayops.errors import InvalidInputError
from tests.conftest import invoice

pytestmark = pytest.mark.django_db

UNREADABLE = {"text": "not an invoice at all"}


def _samples(metric: Metric) -> dict[tuple[str, str], float]:
    return {(s.tenant, s.label): s.value for s in MetricSample.objects.filter(metric=metric)}


def test_the_metric_sampler_records_each_measure(clock):
    queue.enqueue("acme", "ok", 1, invoice(1), clock=clock)
    process_once("w1", clock=clock)  # committed: one succeeded, its event unpublished
    queue.enqueue("globex", "bad", 1, UNREADABLE, clock=clock)
    process_once("w1", clock=clock)  # dead-lettered at once
    letter = DeadLetter.objects.get(tenant="globex")
    ReprocessRefusal.objects.create(at=clock.now(), tenant="globex", operator="olivia", dead_letter=letter,
                                    retry_after_seconds=60)
    liveness.record_presence("n1:1", clock.now(), progress=True)
    liveness.record_presence("n1:2", clock.now() - dt.timedelta(minutes=5), progress=False)  # not alive
    liveness.record_presence("n2:1", clock.now(), progress=False)
    clock.advance(30)

    assert MetricSampler().run_once(clock.now()) > 0

    assert _samples(Metric.FINISHED_PER_MINUTE) == {("acme", "succeeded"): 1.0, ("globex", "dead_lettered"): 1.0}
    assert _samples(Metric.DEAD_LETTERS) == {("globex", letter.reason_code): 1.0}
    assert _samples(Metric.OUTBOX_LAG_SECONDS) == {("acme", ""): 30.0}
    assert _samples(Metric.REPROCESS_REFUSALS) == {("globex", ""): 1.0}
    assert _samples(Metric.DRAINS_ALIVE) == {("", "n1"): 1.0, ("", "n2"): 1.0}


def test_throughput_counts_only_the_minute_before_the_sample(clock):
    queue.enqueue("acme", "ok", 1, invoice(1), clock=clock)
    process_once("w1", clock=clock)
    clock.advance(61)
    MetricSampler().run_once(clock.now())
    assert _samples(Metric.FINISHED_PER_MINUTE) == {}


def test_the_sample_pruner_bounds_the_table(clock):
    now = clock.now()
    for minutes in (0, 10, 60 * 24 * 8, 60 * 24 * 9):
        MetricSample.objects.create(sampled_at=now - dt.timedelta(minutes=minutes), metric=Metric.DRAINS_ALIVE,
                                    label="n1", value=1)
    assert SamplePruner(dt.timedelta(days=7), Batches(size=1)).run_once(now) == 2
    assert MetricSample.objects.count() == 2
    with pytest.raises(InvalidInputError):
        SamplePruner(dt.timedelta(0))


def test_a_sweep_samples_the_measures_and_prunes_them(clock, settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "METRIC_SAMPLE_RETENTION_DAYS": 1.0}
    old = MetricSample.objects.create(sampled_at=clock.now() - dt.timedelta(days=2), metric=Metric.DRAINS_ALIVE,
                                      label="gone", value=0)
    liveness.record_presence("n1:1", clock.now(), progress=False)
    report = Sweeper.from_settings().run_once(clock.now())
    assert report.metric_samples == 1 and report.metric_samples_pruned == 1
    assert not MetricSample.objects.filter(pk=old.pk).exists()
    assert _samples(Metric.DRAINS_ALIVE) == {("", "n1"): 1.0}
