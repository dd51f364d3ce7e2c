"""The measures kept apart, as SQL over the rows that hold them, and their histograms.

Per attempt: queue wait (due -> leased), inference time (the extractor's own), commit time. Per decided
review: review wait (handoff -> decision) and end to end (ingest -> decision). The dashboard reads them
over a window (console.measures); the sweeper folds them into running totals (``MeasureTotal``, by
``maintenance.totals``) that ``/metrics`` exposes as Prometheus histograms.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import connection

from pipeline import sql


class Measure(enum.StrEnum):
    QUEUE_WAIT = "queue_wait"  # due -> leased, per attempt
    INFERENCE = "inference"  # the extractor's own time, per attempt
    COMMIT = "commit"  # the commit transaction, per committed attempt
    REVIEW_WAIT = "review_wait"  # handoff -> decision, per decided review
    END_TO_END = "end_to_end"  # ingest (the job's creation) -> decision, per decided review


# Upper bounds (seconds) of the histograms' buckets: queue waits of milliseconds to an hour, inference
# of a rules extractor (milliseconds) to an LLM's minutes, reviews of seconds to a week.
BOUNDS: dict[Measure, tuple[float, ...]] = {
    Measure.QUEUE_WAIT: (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
    Measure.INFERENCE: (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    Measure.COMMIT: (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
    Measure.REVIEW_WAIT: (1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 8 * 3600, 86400, 3 * 86400, 7 * 86400),
    Measure.END_TO_END: (1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 8 * 3600, 86400, 3 * 86400, 7 * 86400),
}


def seconds_between(later: str, earlier: str) -> str:
    """SQL: ``later - earlier`` in seconds, never negative (two machines' clocks may disagree a little);
    NULL when either is (an attempt whose due time is unknown has no queue wait)."""
    if connection.vendor == "postgresql":
        return f"CASE WHEN {earlier} IS NOT NULL THEN GREATEST(EXTRACT(EPOCH FROM ({later} - {earlier})), 0) END"
    return f"MAX((julianday({later}) - julianday({earlier})) * 86400.0, 0)"


@dataclass(frozen=True)
class Group:
    """Measures held by the same rows: FROM ``rows`` (aliased ``a``, with ``a.tenant``) WHERE ``where``.
    ``at`` is when a row's measures were taken for a window (the dashboard); ``settled`` when its values
    are final (the running totals fold a row once)."""

    rows: str
    where: str
    at: str
    settled: str
    values: dict[Measure, str]


def groups() -> list[Group]:
    return [
        Group("pipeline_attempt a", "1 = 1", "a.leased_at", "a.ended_at", {
            Measure.QUEUE_WAIT: seconds_between("a.leased_at", "a.due_at"),
            Measure.INFERENCE: "a.inference_seconds", Measure.COMMIT: "a.commit_seconds"}),
        Group("pipeline_review a JOIN pipeline_job j ON j.id = a.job_id", "a.decided_at IS NOT NULL",
              "a.decided_at", "a.decided_at", {
                  Measure.REVIEW_WAIT: seconds_between("a.decided_at", "a.created_at"),
                  Measure.END_TO_END: seconds_between("a.decided_at", "j.created_at")}),
    ]


@dataclass
class Histogram:
    """Observations of one measure for one tenant: how many, their sum, and how many fell at or under
    each of ``BOUNDS[measure]`` (cumulative, as Prometheus has them)."""

    count: int = 0
    total: float = 0.0
    buckets: list[int] = field(default_factory=list)

    def add(self, other: Histogram) -> Histogram:
        if self.buckets and other.buckets:
            buckets = [a + b for a, b in zip(self.buckets, other.buckets)]
        else:
            buckets = list(self.buckets or other.buckets)
        return Histogram(self.count + other.count, self.total + other.total, buckets)


def histograms(group: Group, settled_after: dt.datetime | None,
               settled_until: dt.datetime | None) -> dict[tuple[Measure, str], Histogram]:
    """(measure, tenant) -> the histogram of ``group``'s rows settled in (after, until] (None: open),
    every measure of the group counted by one statement."""
    params: dict[str, object] = {}
    where = [group.where, f"{group.settled} IS NOT NULL"]
    if settled_after is not None:
        params["after"] = sql.ts(settled_after)
        where.append(f"{group.settled} > %(after)s")
    if settled_until is not None:
        params["until"] = sql.ts(settled_until)
        where.append(f"{group.settled} <= %(until)s")
    measures: Sequence[Measure] = list(group.values)
    inner = ", ".join(f"{group.values[m]} AS v{i}" for i, m in enumerate(measures))
    columns = []
    for i, measure in enumerate(measures):
        columns.append(f"COUNT(v{i}) AS n{i}, COALESCE(SUM(v{i}), 0) AS s{i}")
        columns += [f"COUNT(CASE WHEN v{i} <= {bound!r} THEN 1 END) AS b{i}_{j}"
                    for j, bound in enumerate(BOUNDS[measure])]
    statement = (f"SELECT w.tenant, {', '.join(columns)} FROM (SELECT a.tenant, {inner} FROM {group.rows} "
                 f"WHERE {' AND '.join(where)}) AS w GROUP BY w.tenant ORDER BY w.tenant")
    found: dict[tuple[Measure, str], Histogram] = {}
    for row in sql.fetch(statement, params):
        for i, measure in enumerate(measures):
            if row[f"n{i}"]:
                found[(measure, row["tenant"])] = Histogram(
                    int(row[f"n{i}"]), float(row[f"s{i}"]),
                    [int(row[f"b{i}_{j}"]) for j in range(len(BOUNDS[measure]))])
    return found


# The hourly histograms (``MeasureHour``) the dashboard's wide windows read their percentiles from:
# log-spaced buckets, so any value is within RESOLUTION of its bucket's value (relative), or within
# FLOOR seconds when it is at most FLOOR (bucket 0, read as 0). Bucket k >= 1 holds (FLOOR g^(k-1), FLOOR g^k].
RESOLUTION = 0.05
FLOOR = 0.0001
GAMMA = (1 + RESOLUTION) / (1 - RESOLUTION)
HOURLY_SPAN = dt.timedelta(days=7, hours=1)  # hours kept: the widest window plus its first, partial hour


def bucket_sql(value: str) -> str:
    """SQL: the bucket of ``value`` (seconds), NULL when it is."""
    return (f"CASE WHEN {value} <= {FLOOR!r} THEN 0 "
            f"ELSE CAST(CEIL(LN({value} / {FLOOR!r}) / {math.log(GAMMA)!r}) AS INTEGER) END")


def bucket_value(k: int) -> float:
    """The value a bucket stands for: within RESOLUTION of every value it holds (FLOOR for bucket 0)."""
    return 0.0 if k <= 0 else FLOOR * 2 * GAMMA**k / (GAMMA + 1)


def hour_sql(at: str) -> str:
    """SQL: the hour of ``at``, as epoch seconds (a multiple of 3600)."""
    if connection.vendor == "postgresql":
        return f"(FLOOR(EXTRACT(EPOCH FROM {at}) / 3600) * 3600)::bigint"
    return f"(CAST(strftime('%%s', {at}) AS INTEGER) / 3600 * 3600)"


def bucket_counts(group: Group, wheres: Sequence[str], params: dict[str, object], by_hour: bool,
                  measures: Sequence[Measure] | None = None) -> dict[tuple[Measure, str, int], dict[int, int]]:
    """(measure, tenant, hour or 0) -> {bucket: count} of ``group``'s rows matching any of ``wheres``
    (SQL over ``a``, disjoint: a row matching two is counted twice; ``group.where`` is added), grouped
    in the database: one statement per measure (of ``measures``, all the group's when None)."""
    found: dict[tuple[Measure, str, int], dict[int, int]] = {}
    hour = hour_sql(group.at) if by_hour else "0"
    for measure, value in group.values.items():
        if measures is not None and measure not in measures:
            continue
        source = " UNION ALL ".join(
            f"SELECT a.tenant, {hour} AS h, {bucket_sql(value)} AS k FROM {group.rows} WHERE {group.where} AND ({where})"
            for where in wheres)
        statement = (f"SELECT w.tenant, w.h, w.k, COUNT(*) AS n FROM ({source}) AS w "
                     f"WHERE w.k IS NOT NULL GROUP BY w.tenant, w.h, w.k")
        for row in sql.fetch(statement, params):
            counts = found.setdefault((measure, row["tenant"], int(row["h"])), {})
            counts[int(row["k"])] = int(row["n"])
    return found
