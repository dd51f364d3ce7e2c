"""The measures kept apart, over a window, per tenant: queue wait, inference time, commit time (per
attempt), review wait and end to end (per decided review). p50/p95/p99 by linear interpolation (what
PostgreSQL's ``percentile_cont`` computes), so the dashboard's numbers are the database's.

Each measure is its own number: a queue wait never includes the extraction, an inference time never
the queue or the review, a review wait never the machine's time.

The wide windows (``ESTIMATED``: 24 h, 7 d) are estimates on PostgreSQL: read from the hourly
histograms the sweeper folds (``MeasureHour``) plus the rows not folded yet and the window's first
and last, partial hours read row by row, so they count exactly the window's rows, and each percentile is within
``RESOLUTION`` (5 %) of the exact ``percentile_cont`` of those rows (or within ``FLOOR``, 0.1 ms, when
it is at most that). Sorting a week of attempts (~190,000 at a million jobs) took half a second; the
hours are a few thousand rows. The last hour is exact (a few hundred rows to sort).

Scoped: ``tenants`` None reads every tenant (a superuser), a set reads only those.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, transaction

from pipeline import sql
from pipeline.maintenance.totals import EPOCH, HOURS_MARK, hour_start
from pipeline.measures import FLOOR, RESOLUTION, Group, Measure, bucket_counts, bucket_value, groups
from pipeline.models import MeasureHour, SweepTurn

WINDOWS = {"1h": dt.timedelta(hours=1), "24h": dt.timedelta(hours=24), "7d": dt.timedelta(days=7)}
DEFAULT_WINDOW = "1h"
ESTIMATED = frozenset({"24h", "7d"})  # read from the hourly histograms (on PostgreSQL)
HOUR = dt.timedelta(hours=1)
QUANTILES = (0.5, 0.95, 0.99)
SORT_MEMORY = "64MB"  # per percentile query (PostgreSQL's work_mem for that transaction only)


LABELS = {
    Measure.QUEUE_WAIT: "queue wait", Measure.INFERENCE: "inference", Measure.COMMIT: "commit",
    Measure.REVIEW_WAIT: "review wait", Measure.END_TO_END: "end to end",
}


def window_of(name: str | None) -> str:
    """A known window's name; anything else is the default (a URL parameter is never trusted)."""
    return name if name in WINDOWS else DEFAULT_WINDOW


@dataclass(frozen=True)
class Percentiles:
    count: int
    p50: float | None
    p95: float | None
    p99: float | None


def interpolated(values: list[float], q: float) -> float:
    """``percentile_cont(q)`` of sorted ``values`` (not empty)."""
    position = q * (len(values) - 1)
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def summarise(values: list[float]) -> Percentiles:
    if not values:
        return Percentiles(0, None, None, None)
    ordered = sorted(values)
    p50, p95, p99 = (interpolated(ordered, q) for q in QUANTILES)
    return Percentiles(len(ordered), p50, p95, p99)


def _tenant_filter(tenants: frozenset[str] | None, params: dict[str, object]) -> str:
    if tenants is None:
        return ""
    names = sorted(tenants) or [""]  # no tenant: matches no row (a tenant name is never blank)
    params.update({f"t{i}": name for i, name in enumerate(names)})
    return f" AND a.tenant IN ({', '.join(f'%(t{i})s' for i in range(len(names)))})"


def _read(group: Group, wanted: list[Measure], now: dt.datetime, window: dt.timedelta,
          tenants: frozenset[str] | None) -> dict[Measure, dict[str, Percentiles]]:
    params: dict[str, object] = {"since": sql.ts(now - window), "now": sql.ts(now)}
    where = (f"{group.where} AND {group.at} > %(since)s AND {group.at} <= %(now)s"
             f"{_tenant_filter(tenants, params)}")
    names = {measure: f"m{i}" for i, measure in enumerate(wanted)}
    inner = ", ".join(f"{group.values[m]} AS {names[m]}" for m in wanted)
    source = f"(SELECT a.tenant, {inner} FROM {group.rows} WHERE {where}) AS w"
    if connection.vendor == "postgresql":
        return _read_postgresql(source, wanted, names, params)
    values: dict[Measure, dict[str, list[float]]] = {m: defaultdict(list) for m in wanted}
    for row in sql.fetch(f"SELECT * FROM {source}", params):
        for m in wanted:
            if row[names[m]] is not None:
                values[m][row["tenant"]].append(float(row[names[m]]))
    return {m: {tenant: summarise(values[m][tenant]) for tenant in sorted(values[m])} for m in wanted}


def _read_postgresql(source: str, wanted: list[Measure], names: dict[Measure, str],
                     params: dict[str, object]) -> dict[Measure, dict[str, Percentiles]]:
    found: dict[Measure, dict[str, Percentiles]] = {m: {} for m in wanted}
    with transaction.atomic():
        with connection.cursor() as cursor:  # a week's rows sort in memory, not on disk
            cursor.execute(f"SET LOCAL work_mem = '{SORT_MEMORY}'")
        columns = ", ".join(f"COUNT({names[m]}) AS {names[m]}_n, percentile_cont(ARRAY[0.5, 0.95, 0.99]) "
                            f"WITHIN GROUP (ORDER BY {names[m]}) AS {names[m]}_q" for m in wanted)
        rows = sql.fetch(f"SELECT w.tenant, {columns} FROM {source} GROUP BY w.tenant ORDER BY w.tenant", params)
    for row in rows:
        for m in wanted:
            if row[f"{names[m]}_n"]:
                found[m][row["tenant"]] = Percentiles(row[f"{names[m]}_n"], *(float(v) for v in row[f"{names[m]}_q"]))
    return found


def is_estimated(window_name: str) -> bool:
    """Whether ``window_name``'s percentiles are bucket estimates (else the exact ``percentile_cont``)."""
    return window_name in ESTIMATED and connection.vendor == "postgresql"


def basis(window_name: str) -> dict[str, object]:
    """What the window's percentiles are, for the dashboard to say."""
    if not is_estimated(window_name):
        return {"estimate": False, "text": "exact"}
    return {"estimate": True, "resolution": RESOLUTION, "floor_seconds": FLOOR,
            "text": f"estimate within {RESOLUTION:.0%} (or {FLOOR * 1000:g} ms), from hourly histograms"}


def from_buckets(counts: dict[int, int]) -> Percentiles:
    """p50/p95/p99 of the observations in ``counts`` ({bucket: count}), each observation read as its
    bucket's value and interpolated as ``percentile_cont`` interpolates: within RESOLUTION of the exact
    percentile (an interpolation of values each within RESOLUTION is)."""
    ordered = sorted((k, n) for k, n in counts.items() if n > 0)
    total = sum(n for _, n in ordered)
    if not total:
        return Percentiles(0, None, None, None)

    def ranked(rank: int) -> float:  # the value of the observation at 0-based ``rank``
        seen = 0
        for k, n in ordered:
            seen += n
            if rank < seen:
                return bucket_value(k)
        return bucket_value(ordered[-1][0])

    found = []
    for q in QUANTILES:
        position = q * (total - 1)
        low = int(position)
        high = min(low + 1, total - 1)
        found.append(ranked(low) + (ranked(high) - ranked(low)) * (position - low))
    return Percentiles(total, *found)


def estimated_percentiles(
    now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None, measures: Iterable[Measure] = Measure,
) -> dict[Measure, dict[str, Percentiles]]:
    """p50/p95/p99 and the exact count of each of ``measures`` per tenant over (now - window, now], from
    the whole hours of the window (``MeasureHour``, folded up to the hours mark) plus, row by row, the
    rows of its first and last, partial hours and the rows in the whole hours not folded yet (settled
    after the mark, or not settled): each row of the window counted once. PostgreSQL; ``window`` at
    least an hour."""
    if window < HOUR:
        raise ValueError("an estimated window spans an hour at least")
    asked = list(measures)
    since = now - window
    first = hour_start(since) + HOUR  # the whole hours of the window: [first, last), after since, before now
    last = hour_start(now)
    counts: dict[tuple[Measure, str], dict[int, int]] = {}

    def add(measure: Measure, tenant: str, found: dict) -> None:
        into = counts.setdefault((measure, tenant), {})
        for k, n in found.items():
            into[int(k)] = into.get(int(k), 0) + int(n)

    repeatable = not connection.in_atomic_block
    with transaction.atomic():
        if repeatable:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        mark = SweepTurn.objects.filter(name=HOURS_MARK).values_list("taken_at", flat=True).first() or EPOCH
        params: dict[str, object] = {"since": sql.ts(since), "now": sql.ts(now), "first": sql.ts(first),
                                     "last": sql.ts(last), "mark": sql.ts(mark), "measures": [str(m) for m in asked]}
        scope = _tenant_filter(tenants, params)
        summed = (f"SELECT a.measure, a.tenant, CAST(c.key AS INTEGER) AS k, SUM(CAST(c.value AS BIGINT)) AS n "
                  f"FROM {MeasureHour._meta.db_table} a, jsonb_each_text(a.counts) AS c "
                  f"WHERE a.hour >= %(first)s AND a.hour < %(last)s AND a.measure = ANY(%(measures)s){scope} "
                  f"GROUP BY a.measure, a.tenant, k")  # the hours' buckets summed in the database
        for row in sql.fetch(summed, params):
            add(Measure(row["measure"]), row["tenant"], {row["k"]: row["n"]})
        for group in groups():
            wanted = [m for m in asked if m in group.values]
            if not wanted:
                continue
            at, settled = group.at, group.settled
            wheres = [  # disjoint: before the whole hours; in them, settled after the mark or not settled; after them
                f"{at} > %(since)s AND {at} < %(first)s{scope}",
                f"{at} >= %(first)s AND {at} < %(last)s AND {settled} > %(mark)s{scope}",
                f"{at} >= %(first)s AND {at} < %(last)s AND {settled} IS NULL{scope}",
                f"{at} >= %(last)s AND {at} <= %(now)s{scope}",
            ]
            for (measure, tenant, _), found in bucket_counts(group, wheres, params, False, wanted).items():
                add(measure, tenant, found)
    return {m: {tenant: from_buckets(c) for (measure, tenant), c in sorted(counts.items()) if measure == m}
            for m in asked}


def window_percentiles(
    now: dt.datetime, window_name: str, tenants: frozenset[str] | None, measures: Iterable[Measure] = Measure,
) -> dict[Measure, dict[str, Percentiles]]:
    """The dashboard's percentiles for ``window_name``: estimates for the wide windows (``is_estimated``),
    exact for the others."""
    if is_estimated(window_name):
        return estimated_percentiles(now, WINDOWS[window_name], tenants, measures)
    return all_percentiles(now, WINDOWS[window_name], tenants, measures)


def all_percentiles(
    now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None, measures: Iterable[Measure] = Measure,
) -> dict[Measure, dict[str, Percentiles]]:
    """p50/p95/p99 and the count of each of ``measures`` per tenant over (now - window, now]."""
    asked = list(measures)
    found: dict[Measure, dict[str, Percentiles]] = {}
    for group in groups():
        wanted = [m for m in asked if m in group.values]
        if wanted:
            found.update(_read(group, wanted, now, window, tenants))
    return {m: found[m] for m in asked}


def percentiles(
    measure: Measure, now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None,
) -> dict[str, Percentiles]:
    """p50/p95/p99 and the count of ``measure`` per tenant over (now - window, now]."""
    return all_percentiles(now, window, tenants, [measure])[measure]
