"""The measures kept apart, over a window, per tenant: queue wait, inference time, commit time (per
attempt), review wait and end to end (per decided review). p50/p95/p99 by linear interpolation (what
PostgreSQL's ``percentile_cont`` computes), so the dashboard's numbers are the database's.

Each measure is its own number: a queue wait never includes the extraction, an inference time never
the queue or the review, a review wait never the machine's time.

Scoped: ``tenants`` None reads every tenant (a superuser), a set reads only those.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from pipeline import sql

WINDOWS = {"1h": dt.timedelta(hours=1), "24h": dt.timedelta(hours=24), "7d": dt.timedelta(days=7)}
DEFAULT_WINDOW = "1h"
QUANTILES = (0.5, 0.95, 0.99)


class Measure(enum.StrEnum):
    QUEUE_WAIT = "queue_wait"  # due -> leased, per attempt
    INFERENCE = "inference"  # the extractor's own time, per attempt
    COMMIT = "commit"  # the commit transaction, per committed attempt
    REVIEW_WAIT = "review_wait"  # handoff -> decision, per decided review
    END_TO_END = "end_to_end"  # ingest (the job's creation) -> decision, per decided review


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


def _seconds_between(later: str, earlier: str) -> str:
    """``later - earlier`` in seconds, never negative (clocks of two machines may disagree a little);
    NULL when either is (an attempt whose due time is unknown has no queue wait)."""
    if connection.vendor == "postgresql":
        return f"CASE WHEN {earlier} IS NOT NULL THEN GREATEST(EXTRACT(EPOCH FROM ({later} - {earlier})), 0) END"
    return f"MAX((julianday({later}) - julianday({earlier})) * 86400.0, 0)"


# The measures by the rows that hold them: per attempt (its window is when it was leased) and per
# decided review (when it was decided). Each group is read in one statement, one pass over the window's
# rows, which the indexes attempt_tenant_leased / attempt_leased and review_tenant_decided /
# review_decided serve. A value that is NULL (an attempt still running, no commit) is left out of that
# measure only (percentile_cont skips NULLs).
@dataclass(frozen=True)
class _Group:
    rows: str  # FROM ... (aliased a, with a.tenant)
    where: str  # what every row of the group satisfies
    at: str  # the window's column
    values: dict[Measure, str]


def _groups() -> list[_Group]:
    return [
        _Group("pipeline_attempt a", "1 = 1", "a.leased_at", {
            Measure.QUEUE_WAIT: _seconds_between("a.leased_at", "a.due_at"),
            Measure.INFERENCE: "a.inference_seconds", Measure.COMMIT: "a.commit_seconds"}),
        _Group("pipeline_review a JOIN pipeline_job j ON j.id = a.job_id", "a.decided_at IS NOT NULL", "a.decided_at", {
            Measure.REVIEW_WAIT: _seconds_between("a.decided_at", "a.created_at"),
            Measure.END_TO_END: _seconds_between("a.decided_at", "j.created_at")}),
    ]


def _tenant_filter(tenants: frozenset[str] | None, params: dict[str, object]) -> str:
    if tenants is None:
        return ""
    names = sorted(tenants) or [""]  # no tenant: matches no row (a tenant name is never blank)
    params.update({f"t{i}": name for i, name in enumerate(names)})
    return f" AND a.tenant IN ({', '.join(f'%(t{i})s' for i in range(len(names)))})"


def _read(group: _Group, wanted: list[Measure], now: dt.datetime, window: dt.timedelta,
          tenants: frozenset[str] | None) -> dict[Measure, dict[str, Percentiles]]:
    params: dict[str, object] = {"since": sql.ts(now - window), "now": sql.ts(now)}
    where = (f"{group.where} AND {group.at} > %(since)s AND {group.at} <= %(now)s"
             f"{_tenant_filter(tenants, params)}")
    names = {measure: f"m{i}" for i, measure in enumerate(wanted)}
    inner = ", ".join(f"{group.values[m]} AS {names[m]}" for m in wanted)
    source = f"(SELECT a.tenant, {inner} FROM {group.rows} WHERE {where}) AS w"
    found: dict[Measure, dict[str, Percentiles]] = {m: {} for m in wanted}
    if connection.vendor == "postgresql":
        columns = ", ".join(f"COUNT({names[m]}) AS {names[m]}_n, percentile_cont(ARRAY[0.5, 0.95, 0.99]) "
                            f"WITHIN GROUP (ORDER BY {names[m]}) AS {names[m]}_q" for m in wanted)
        for row in sql.fetch(f"SELECT w.tenant, {columns} FROM {source} GROUP BY w.tenant ORDER BY w.tenant", params):
            for m in wanted:
                if row[f"{names[m]}_n"]:
                    found[m][row["tenant"]] = Percentiles(row[f"{names[m]}_n"], *(float(v) for v in row[f"{names[m]}_q"]))
        return found
    values: dict[Measure, dict[str, list[float]]] = {m: defaultdict(list) for m in wanted}
    for row in sql.fetch(f"SELECT * FROM {source}", params):
        for m in wanted:
            if row[names[m]] is not None:
                values[m][row["tenant"]].append(float(row[names[m]]))
    return {m: {tenant: summarise(values[m][tenant]) for tenant in sorted(values[m])} for m in wanted}


def all_percentiles(
    now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None, measures: Iterable[Measure] = Measure,
) -> dict[Measure, dict[str, Percentiles]]:
    """p50/p95/p99 and the count of each of ``measures`` per tenant over (now - window, now]."""
    asked = list(measures)
    found: dict[Measure, dict[str, Percentiles]] = {}
    for group in _groups():
        wanted = [m for m in asked if m in group.values]
        if wanted:
            found.update(_read(group, wanted, now, window, tenants))
    return {m: found[m] for m in asked}


def percentiles(
    measure: Measure, now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None,
) -> dict[str, Percentiles]:
    """p50/p95/p99 and the count of ``measure`` per tenant over (now - window, now]."""
    return all_percentiles(now, window, tenants, [measure])[measure]
