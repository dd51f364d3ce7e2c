"""The measures kept apart, over a window, per tenant: queue wait, inference time, commit time (per
attempt), review wait and end to end (per decided review). p50/p95/p99 by linear interpolation (what
PostgreSQL's ``percentile_cont`` computes), so the dashboard's numbers are the database's.

Each measure is its own number: a queue wait never includes the extraction, an inference time never
the queue or the review, a review wait never the machine's time.

Scoped: ``tenants`` None reads every tenant (a superuser), a set reads only those.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, transaction

from pipeline import sql
from pipeline.measures import Group, Measure, groups

WINDOWS = {"1h": dt.timedelta(hours=1), "24h": dt.timedelta(hours=24), "7d": dt.timedelta(days=7)}
DEFAULT_WINDOW = "1h"
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
