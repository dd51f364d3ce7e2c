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
    """``later - earlier`` in seconds, never negative (clocks of two machines may disagree a little)."""
    if connection.vendor == "postgresql":
        return f"GREATEST(EXTRACT(EPOCH FROM ({later} - {earlier})), 0)"
    return f"MAX((julianday({later}) - julianday({earlier})) * 86400.0, 0)"


# Each measure: its rows (FROM ... WHERE ...), its value and the column its window reads (when the attempt
# was leased, the review decided). The indexes attempt_tenant_leased / attempt_leased and
# review_tenant_decided / review_decided serve the window.
def _source(measure: Measure) -> tuple[str, str, str]:
    attempts, reviews = "pipeline_attempt a WHERE", "pipeline_review a WHERE a.decided_at IS NOT NULL"
    if measure is Measure.QUEUE_WAIT:
        return f"{attempts} a.due_at IS NOT NULL", _seconds_between("a.leased_at", "a.due_at"), "a.leased_at"
    if measure is Measure.INFERENCE:
        return f"{attempts} a.inference_seconds IS NOT NULL", "a.inference_seconds", "a.leased_at"
    if measure is Measure.COMMIT:
        return f"{attempts} a.commit_seconds IS NOT NULL", "a.commit_seconds", "a.leased_at"
    if measure is Measure.REVIEW_WAIT:
        return reviews, _seconds_between("a.decided_at", "a.created_at"), "a.decided_at"
    return (reviews.replace("a WHERE", "a JOIN pipeline_job j ON j.id = a.job_id WHERE"),
            _seconds_between("a.decided_at", "j.created_at"), "a.decided_at")


def _tenant_filter(tenants: frozenset[str] | None, params: dict[str, object]) -> str:
    if tenants is None:
        return ""
    names = sorted(tenants)
    if not names:
        return " AND FALSE" if connection.vendor == "postgresql" else " AND 0"
    placeholders = []
    for i, name in enumerate(names):
        params[f"t{i}"] = name
        placeholders.append(f"%(t{i})s")
    return f" AND a.tenant IN ({', '.join(placeholders)})"


def percentiles(
    measure: Measure, now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None,
) -> dict[str, Percentiles]:
    """p50/p95/p99 and the count of ``measure`` per tenant over (now - window, now]."""
    rows_from, value, at = _source(measure)
    params: dict[str, object] = {"since": sql.ts(now - window), "now": sql.ts(now)}
    where = f"{rows_from} AND {at} > %(since)s AND {at} <= %(now)s{_tenant_filter(tenants, params)}"
    if connection.vendor == "postgresql":
        statement = (f"SELECT a.tenant, COUNT(*) AS n, percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP "
                     f"(ORDER BY {value}) AS q FROM {where} GROUP BY a.tenant ORDER BY a.tenant")
        return {row["tenant"]: Percentiles(row["n"], *(float(v) for v in row["q"]))
                for row in sql.fetch(statement, params)}
    values: dict[str, list[float]] = defaultdict(list)
    for row in sql.fetch(f"SELECT a.tenant, {value} AS v FROM {where}", params):
        values[row["tenant"]].append(float(row["v"]))
    return {tenant: summarise(values[tenant]) for tenant in sorted(values)}


def all_percentiles(
    now: dt.datetime, window: dt.timedelta, tenants: frozenset[str] | None, measures: Iterable[Measure] = Measure,
) -> dict[Measure, dict[str, Percentiles]]:
    return {measure: percentiles(measure, now, window, tenants) for measure in measures}
