"""The dashboard's wide windows read their percentiles from hourly histograms the sweeper folds: the
estimates count exactly the window's rows (hours folded, the first partial hour and the rows not folded
yet read row by row), each percentile within RESOLUTION of PostgreSQL's percentile_cont of the same rows;
the fold adds each row once; an operator reads only their tenants."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from console import measures
from console.measures import Measure, Percentiles
from pipeline import queue, sql
from pipeline.maintenance.totals import SETTLE, TotalsFolder
from pipeline.measures import FLOOR, GAMMA, HOURLY_SPAN, RESOLUTION, bucket_sql, bucket_value
from pipeline.models import Attempt, MeasureHour
from tests.conftest import invoice

pytestmark = pytest.mark.django_db

DAY = dt.timedelta(hours=24)


def _seed(clock, n: int, hours: float) -> None:
    """``n`` attempts over ``hours``, two tenants, queue waits of 0 to 20 s, inference of 0 to 3 s."""
    rng = random.Random(11)
    for i in range(n):
        tenant = "acme" if i % 3 else "globex"
        queue.enqueue(tenant, f"d{i}", 1, invoice(i), clock=clock)
        wait = 0.0 if i % 17 == 0 else rng.uniform(0, 20)  # some zero waits: the FLOOR bucket
        clock.advance(wait)
        lease = queue.lease_next("w1", clock=clock)
        assert lease is not None
        Attempt.objects.filter(job_id=lease.job_id).update(inference_seconds=rng.uniform(0.0005, 3))
        clock.advance(rng.uniform(0, 2))
        if i % 11:  # a few stay open (not ended, never folded)
            queue.ack(lease, clock=clock)
        clock.advance(hours * 3600 / n)


def _close(estimate: Percentiles, exact: Percentiles) -> None:
    assert estimate.count == exact.count
    for got, want in ((estimate.p50, exact.p50), (estimate.p95, exact.p95), (estimate.p99, exact.p99)):
        assert got is not None and want is not None
        assert abs(got - want) <= RESOLUTION * want + FLOOR + 1e-9, (got, want)


def _agree(now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None) -> None:
    estimated = measures.estimated_percentiles(now, window, tenants)
    exact = measures.all_percentiles(now, window, tenants)
    assert set(estimated) == set(exact)
    for measure in exact:
        assert sorted(estimated[measure]) == sorted(exact[measure]), measure
        for tenant in exact[measure]:
            assert estimated[measure][tenant].count == exact[measure][tenant].count, (measure, tenant, now, window)
            _close(estimated[measure][tenant], exact[measure][tenant])


def test_a_value_is_within_the_resolution_of_its_buckets_value():
    values = [0.0, FLOOR / 2, FLOOR, FLOOR * 1.0001, 0.0123, 0.5, 1.0, 2.5, 59.9, 3600.0, 86400 * 7.0, 1e7]
    statement = " UNION ALL ".join(f"SELECT {v!r}::float8 AS v, {bucket_sql(repr(v) + '::float8')} AS k" for v in values)
    for row in sql.fetch(statement, {}):
        value, k = row["v"], row["k"]
        assert abs(bucket_value(k) - value) <= RESOLUTION * value + (FLOOR if value <= FLOOR else 0) + 1e-12
        assert k == 0 or FLOOR * GAMMA ** (k - 1) < value * (1 + 1e-12)


def test_wide_windows_estimate_within_the_resolution_of_percentile_cont_of_exactly_the_same_rows(clock):
    _seed(clock, 240, hours=30)
    now = clock.now()
    _agree(now, DAY, None)  # nothing folded yet: every row read row by row
    assert TotalsFolder().run_once(now) > 0
    assert MeasureHour.objects.exists()
    _agree(now, DAY, None)  # folded hours + the partial first hour + what settled after the mark
    for later in (dt.timedelta(minutes=17), dt.timedelta(minutes=61)):  # no fold since: more rows after the mark
        _agree(now + later, DAY, None)
    _agree(now, dt.timedelta(days=7), None)
    on_the_hour = now.replace(minute=0, second=0, microsecond=0)  # a window that starts on an hour
    _agree(on_the_hour, DAY, None)
    _agree(now, DAY, frozenset({"globex"}))


def test_the_fold_adds_each_settled_row_to_its_hour_once(clock):
    _seed(clock, 90, hours=5)
    now = clock.now()

    def folded() -> dict[str, int]:
        found: dict[str, int] = {}
        for row in MeasureHour.objects.all():
            found[row.measure] = found.get(row.measure, 0) + sum(row.counts.values())
        return found

    def settled(by: dt.datetime) -> dict[str, int]:
        rows = Attempt.objects.filter(ended_at__lte=by)
        return {Measure.QUEUE_WAIT: rows.exclude(due_at=None).count(),
                Measure.INFERENCE: rows.exclude(inference_seconds=None).count(),
                Measure.COMMIT: rows.exclude(commit_seconds=None).count()}

    TotalsFolder().run_once(now)
    first = folded()
    expected = {str(m): n for m, n in settled(now - SETTLE).items() if n}
    assert first == expected
    TotalsFolder().run_once(now)  # the same instant again: nothing moves
    assert folded() == first
    queue.enqueue("acme", "late", 1, invoice(999), clock=clock)  # ends after the first fold
    clock.advance(3)
    queue.ack(queue.lease_next("w1", clock=clock), clock=clock)
    later = clock.now() + SETTLE + dt.timedelta(minutes=5)
    TotalsFolder().run_once(later)  # the rows that settled since, once
    assert folded() == {str(m): n for m, n in settled(later - SETTLE).items() if n}
    assert sum(folded().values()) > sum(first.values())
    TotalsFolder().run_once(now + HOURLY_SPAN + dt.timedelta(days=1))  # hours past the widest window are dropped
    assert not MeasureHour.objects.exists()


def test_estimates_are_scoped_to_the_callers_tenants(clock):
    _seed(clock, 60, hours=3)
    now = clock.now()
    TotalsFolder().run_once(now)
    for measure, per_tenant in measures.estimated_percentiles(now, DAY, frozenset({"acme"})).items():
        assert set(per_tenant) <= {"acme"}, measure
    assert measures.estimated_percentiles(now, DAY, frozenset({"acme"}))[Measure.QUEUE_WAIT]
    assert all(v == {} for v in measures.estimated_percentiles(now, DAY, frozenset()).values())
    assert all(v == {} for v in measures.estimated_percentiles(now, DAY, frozenset({"initech"})).values())


def test_the_dashboard_says_which_windows_are_estimates():
    assert measures.basis("1h") == {"estimate": False, "text": "exact"}
    for name in ("24h", "7d"):
        said = measures.basis(name)
        assert said["estimate"] is True and said["resolution"] == RESOLUTION and "5%" in str(said["text"])
    assert max(measures.WINDOWS.values()) + dt.timedelta(hours=1) <= HOURLY_SPAN  # every window's hours are kept
