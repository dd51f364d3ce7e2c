"""The wide windows' series read the twelve-minute slots the sweeper rolls the metric samples into: the
points are the same as from the samples, before and after a roll-up, scoped alike; each slot is rolled
up once."""

from __future__ import annotations

import datetime as dt

import pytest

from console import dashboard
from pipeline.maintenance.totals import SETTLE, SLOT, TotalsFolder
from pipeline.models import Metric, MetricSample, MetricSlot

pytestmark = pytest.mark.django_db

START = dt.datetime(2026, 3, 1, 9, 0, 17, tzinfo=dt.timezone.utc)  # samples off the slots' boundaries
MINUTES = 30 * 60


def _seed() -> None:
    rows = []
    for m in range(MINUTES):
        at = START + dt.timedelta(minutes=m)
        for i, tenant in enumerate(("acme", "globex")):
            for j, outcome in enumerate(("succeeded", "cancelled")):
                rows.append(MetricSample(sampled_at=at, metric=Metric.FINISHED_PER_MINUTE, tenant=tenant,
                                         label=outcome, value=(m * (i + 2) + j) % 7))
            rows.append(MetricSample(sampled_at=at, metric=Metric.OUTBOX_LAG_SECONDS, tenant=tenant,
                                     value=((m * 13 + i) % 50) / 10))
        for node in ("n1", "n2"):
            rows.append(MetricSample(sampled_at=at, metric=Metric.DRAINS_ALIVE, label=node, value=4 - (m % 5 == 0)))
    MetricSample.objects.bulk_create(rows, batch_size=5000)


SERIES = ((Metric.FINISHED_PER_MINUTE, "SUM", "SUM", 60 / 720), (Metric.OUTBOX_LAG_SECONDS, "MAX", "MAX", 1.0),
          (Metric.DRAINS_ALIVE, "SUM", "MIN", 1.0), (Metric.REPROCESS_REFUSALS, "SUM", "SUM", 1.0))


def _series(now: dt.datetime, window: dt.timedelta, step: int, tenants: frozenset[str] | None) -> list:
    return [dashboard._sampled(metric, now - window, tenants, step, per_label=per_label, per_point=per_point,
                               scale=scale) for metric, per_label, per_point, scale in SERIES]


@pytest.mark.parametrize("tenants", [None, frozenset({"globex"}), frozenset()])
def test_points_from_slots_equal_points_from_samples(tenants):
    _seed()
    now = START + dt.timedelta(minutes=MINUTES)
    expected = {(w, s): _series(now, w, s, tenants) for w, s in ((dt.timedelta(hours=24), 720),
                                                                  (dt.timedelta(days=7), 5040))}
    assert dashboard._from_slots(Metric.FINISHED_PER_MINUTE, 720) and not dashboard._from_slots(Metric.DEAD_LETTERS, 720)
    assert bool(expected[(dt.timedelta(hours=24), 720)][0]) == (tenants != frozenset())  # something to compare
    TotalsFolder().run_once(now - dt.timedelta(hours=3))  # part rolled up: slots, then samples
    assert MetricSlot.objects.exists()
    for (window, step), series in expected.items():
        assert _series(now, window, step, tenants) == series
    TotalsFolder().run_once(now + SETTLE + dt.timedelta(seconds=SLOT))  # all of it
    for (window, step), series in expected.items():
        assert _series(now, window, step, tenants) == series
    later = now + dt.timedelta(minutes=7)  # a window starting inside a slot
    assert _series(later, dt.timedelta(hours=24), 720, tenants) == [
        s for s in _raw(later, tenants)]


def _raw(now: dt.datetime, tenants: frozenset[str] | None) -> list:
    """The same points from the samples alone (the slots mark set back)."""
    from pipeline.models import SweepTurn

    from pipeline.maintenance.totals import SLOTS_MARK
    mark = SweepTurn.objects.get(name=SLOTS_MARK)
    kept = mark.taken_at
    SweepTurn.objects.filter(name=SLOTS_MARK).update(taken_at=dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))
    try:
        return _series(now, dt.timedelta(hours=24), 720, tenants)
    finally:
        SweepTurn.objects.filter(name=SLOTS_MARK).update(taken_at=kept)


def test_each_slot_is_rolled_up_once_and_whole():
    _seed()
    now = START + dt.timedelta(minutes=MINUTES)
    TotalsFolder().run_once(now)
    first = sorted(MetricSlot.objects.values_list("metric", "tenant", "label", "slot", "samples"))
    TotalsFolder().run_once(now)
    assert sorted(MetricSlot.objects.values_list("metric", "tenant", "label", "slot", "samples")) == first
    TotalsFolder().run_once(now + dt.timedelta(minutes=30))
    slots = MetricSlot.objects.all()
    for slot in slots:  # every slot holds all of its samples, whatever fold rolled it up
        samples = MetricSample.objects.filter(metric=slot.metric, tenant=slot.tenant, label=slot.label,
                                              sampled_at__gte=slot.slot,
                                              sampled_at__lt=slot.slot + dt.timedelta(seconds=SLOT))
        assert slot.samples == samples.count()
        assert slot.total == pytest.approx(sum(s.value for s in samples))
    assert sum(s.samples for s in slots) == MetricSample.objects.exclude(metric=Metric.DEAD_LETTERS).count()
