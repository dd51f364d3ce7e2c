"""What the dashboard (the admin's front page) shows, as one JSON-ready dict: series over the chosen window
(queue depth, throughput, dead letters by reason, outbox lag, drains alive per node, reprocess refusals)
from the sampled tables, and the numbers beside them from the live tables (current depth and oldest
live job per tenant, p50/p95/p99 of each measure per tenant, dead letters by reason, outbox lag, nodes
and their drains, the oldest due job). The wide windows' percentiles are estimates from hourly
histograms, within 5 % of the exact ones; ``percentiles_basis`` (and a column of the table) says which.

Tenant-scoped: ``tenants`` None is a superuser (every tenant), a set an operator's or auditor's tenants.
Drains and nodes serve every tenant and carry no tenant data: everyone sees them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Min, QuerySet
from django.urls import reverse

from console import measures, status
from controls import services as controls
from console.measures import LABELS, Measure, Percentiles
from dlq.models import ReprocessRefusal
from pipeline import sql
from pipeline.clock import seconds_since
from pipeline.maintenance import totals
from pipeline.models import CLAIMABLE_FROM, DeadLetter, Job, Metric, OutboxEvent, SweepTurn
from pipeline.states import LIVE_STATUSES, JobStatus

POINTS = 120  # at most this many points per series, whatever the window
ALIVE_WITHIN = dt.timedelta(minutes=1)
CHART_MEASURES = (Measure.QUEUE_WAIT, Measure.INFERENCE, Measure.REVIEW_WAIT)



def paused_tenants(tenants: frozenset[str] | None) -> list[str]:
    """The tenants (of ``tenants``; all when None) whose intake is paused, shown with the depth."""
    return [t for t in controls.paused_tenants() if tenants is None or t in tenants]


def _scoped(queryset: QuerySet, tenants: frozenset[str] | None, field: str = "tenant") -> QuerySet:
    return queryset if tenants is None else queryset.filter(**{f"{field}__in": sorted(tenants)})


def _epoch(at: dt.datetime) -> int:
    return int(at.timestamp())


def _step(window: dt.timedelta) -> int:
    """Seconds per point: the window over POINTS, at least a minute (the sampler's pace)."""
    return max(60, int(window.total_seconds() // POINTS))


def _bucket(step: int) -> str:
    """The SQL of a sample's point: its time in epoch seconds, floored to ``step``."""
    if connection.vendor == "postgresql":  # timestamp arithmetic: EXTRACT's numeric division is slow per row
        return f"EXTRACT(EPOCH FROM date_bin('{step} seconds', sampled_at, 'epoch'))::bigint"
    return f"(CAST(strftime('%%s', sampled_at) AS INTEGER) / {step} * {step})"  # %% : a literal % beside params


def _in_tenants(tenants: frozenset[str] | None, params: dict[str, Any]) -> str:
    if tenants is None:
        return ""
    names = sorted(tenants) or [""]  # no tenant: matches no row (a tenant name is never blank)
    params.update({f"t{i}": name for i, name in enumerate(names)})
    return f" AND tenant IN ({', '.join(f'%(t{i})s' for i in range(len(names)))})"


def _points(rows: list[dict[str, Any]], column: str, scale: float = 1.0) -> list[list[float]]:
    return [[int(row["b"]), round(float(row[column]) * scale, 3)] for row in rows]


def _depth_series(since: dt.datetime, tenants: frozenset[str] | None, step: int) -> dict[str, list[list[float]]]:
    """Queued, leased and due over time, summed over the tenants of each sample, the highest per point.
    Grouped in the database: at most POINTS rows come back whatever the window."""
    params: dict[str, Any] = {"since": sql.ts(since)}
    statement = (
        f"SELECT b, MAX(q) AS queued, MAX(l) AS leased, MAX(d) AS due FROM ("
        f"SELECT {_bucket(step)} AS b, SUM(queued) AS q, SUM(leased) AS l, SUM(due) AS d "
        f"FROM pipeline_queuedepthsample WHERE sampled_at > %(since)s{_in_tenants(tenants, params)} "
        f"GROUP BY sampled_at) AS instants GROUP BY b ORDER BY b")
    rows = sql.fetch(statement, params)
    return {name: _points(rows, name) for name in ("queued", "leased", "due")}


def _from_slots(metric: Metric, step: int) -> bool:
    """Whether ``metric``'s points of ``step`` seconds are read from the rolled-up slots: each point is
    whole slots (PostgreSQL, a metric the slots serve exactly)."""
    return connection.vendor == "postgresql" and str(metric) in totals.ROLLED and step % totals.SLOT == 0


SLOT_COLUMN = {"SUM": "total", "MAX": "high", "MIN": "low"}


def _slotted(since: dt.datetime, step: int, per_point: str, scoped: str, params: dict[str, Any]) -> str:
    """The points from the slots over by the slots mark, after the window's first, partial slot; the
    samples of that first slot and those after the mark are read as they are. Every sample of the window
    counted once: (since, first) and [max(first, mark), ...) from the samples, [first, mark) from slots."""
    first = totals.slot_start(since) + dt.timedelta(seconds=totals.SLOT)
    mark = SweepTurn.objects.filter(name=totals.SLOTS_MARK).values_list("taken_at", flat=True).first() or totals.EPOCH
    params.update({"first": sql.ts(first), "mark": sql.ts(mark)})
    slot_point = f"EXTRACT(EPOCH FROM date_bin('{step} seconds', slot, 'epoch'))::bigint"
    return (
        f"SELECT label, b, {per_point}(v) AS v FROM ("
        f"SELECT label, {slot_point} AS b, {per_point}({SLOT_COLUMN[per_point]}) AS v FROM pipeline_metricslot "
        f"WHERE metric = %(metric)s AND slot >= %(first)s AND slot < %(mark)s{scoped} GROUP BY label, b "
        f"UNION ALL SELECT label, {_bucket(step)} AS b, {per_point}(value) AS v FROM pipeline_metricsample "
        f"WHERE metric = %(metric)s AND sampled_at > %(since)s{scoped} "
        f"AND (sampled_at < %(first)s OR sampled_at >= GREATEST(%(first)s, %(mark)s)) GROUP BY label, b"
        f") AS parts GROUP BY label, b ORDER BY label, b")


def _sampled(metric: Metric, since: dt.datetime, tenants: frozenset[str] | None, step: int, *, per_label: str,
             per_point: str, scale: float = 1.0) -> dict[str, list[list[float]]]:
    """label -> points of ``metric``: summed over tenants per sample (``per_label``: how the labels'
    rows of one instant combine), then ``per_point`` over the samples of each point, in the database."""
    params: dict[str, Any] = {"since": sql.ts(since), "metric": str(metric)}
    scoped = "" if metric == Metric.DRAINS_ALIVE else _in_tenants(tenants, params)
    rows = f"FROM pipeline_metricsample WHERE metric = %(metric)s AND sampled_at > %(since)s{scoped}"
    if _from_slots(metric, step):
        statement = _slotted(since, step, per_point, scoped, params)
    elif per_label == per_point:  # a sum of sums is a sum (a max of maxima a max): one grouping, not two
        statement = f"SELECT label, {_bucket(step)} AS b, {per_point}(value) AS v {rows} GROUP BY label, b ORDER BY label, b"
    else:
        statement = (f"SELECT label, b, {per_point}(v) AS v FROM (SELECT label, {_bucket(step)} AS b, "
                     f"{per_label}(value) AS v {rows} GROUP BY label, sampled_at) AS instants "
                     f"GROUP BY label, b ORDER BY label, b")
    series: dict[str, list[list[float]]] = defaultdict(list)
    for row in sql.fetch(statement, params):
        series[row["label"]].append([int(row["b"]), round(float(row["v"]) * scale, 3)])
    return dict(series)


def _percentile_rows(table: dict[Measure, dict[str, Percentiles]]) -> list[dict[str, Any]]:
    rows = []
    for measure, per_tenant in table.items():
        for tenant, value in per_tenant.items():
            rows.append({"measure": str(measure), "label": LABELS[measure], "tenant": tenant, "count": value.count,
                         "p50": _r(value.p50), "p95": _r(value.p95), "p99": _r(value.p99)})
    return rows


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _oldest_due(now: dt.datetime, tenants: frozenset[str] | None) -> dict[str, Any] | None:
    """The first job in line among those due now (the claim's order), with a link to its page."""
    job = (_scoped(Job.objects.claimable(now), tenants).order_by("visible_at", "id")
           .values("id", "tenant", "document_id", "status", "visible_at", "lease_until").first())
    if job is None:
        return None
    due_since = job["lease_until"] if job["status"] == JobStatus.LEASED else job["visible_at"]
    return {"id": job["id"], "tenant": job["tenant"], "document_id": job["document_id"],
            "waited_seconds": _r(seconds_since(now, due_since)),
            "url": reverse("admin:pipeline_job_change", args=[job["id"]])}


def _tenant_rows(now: dt.datetime, tenants: frozenset[str] | None) -> list[dict[str, Any]]:
    """Per tenant, now: queued, leased, due, the oldest due job's wait, the oldest live job's age,
    unpublished events and the outbox lag."""
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "queued": 0, "leased": 0, "due": 0, "oldest_due_seconds": None, "oldest_live_age_seconds": None,
        "outbox_pending": 0, "outbox_lag_seconds": None})
    live = _scoped(Job.objects.filter(status__in=LIVE_STATUSES), tenants)
    for row in live.values("tenant", "status").annotate(n=Count("pk"), oldest=Min("created_at")).order_by():
        entry = rows[row["tenant"]]
        entry[row["status"]] = row["n"]
        age = seconds_since(now, row["oldest"])
        if entry["oldest_live_age_seconds"] is None or (age or 0) > entry["oldest_live_age_seconds"]:
            entry["oldest_live_age_seconds"] = _r(age)
    due = _scoped(Job.objects.claimable(now), tenants).values("tenant").annotate(n=Count("pk"), at=Min(CLAIMABLE_FROM))
    for row in due.order_by():
        rows[row["tenant"]]["due"] = row["n"]
        rows[row["tenant"]]["oldest_due_seconds"] = _r(seconds_since(now, row["at"]))
    events = _scoped(OutboxEvent.objects.unpublished(), tenants).values("tenant").annotate(
        n=Count("pk"), at=Min("created_at"))
    for row in events.order_by():
        rows[row["tenant"]]["outbox_pending"] = row["n"]
        rows[row["tenant"]]["outbox_lag_seconds"] = _r(seconds_since(now, row["at"]))
    return [{"tenant": tenant, **rows[tenant]} for tenant in sorted(rows)]


def _dead_letters(tenants: frozenset[str] | None) -> list[dict[str, Any]]:
    rows = _scoped(DeadLetter.objects.all(), tenants).values("reason_code").annotate(n=Count("pk")).order_by("reason_code")
    return [{"reason": row["reason_code"], "count": row["n"]} for row in rows]


def _nodes(now: dt.datetime) -> list[dict[str, Any]]:
    return [{"node": n.node, "drains_alive": n.drains, "last_seen_seconds": _r(n.last_seen_seconds),
             "last_progress_seconds": _r(n.last_progress_seconds), "stopped_seconds": _r(n.stopped_seconds)}
            for n in status.nodes(now, ALIVE_WITHIN)]


def _refusals(since: dt.datetime, tenants: frozenset[str] | None) -> int:
    return _scoped(ReprocessRefusal.objects.filter(at__gt=since), tenants).count()


def build(now: dt.datetime, window_name: str, tenants: frozenset[str] | None) -> dict[str, Any]:
    """Everything the dashboard draws and prints, for ``window_name`` (1h, 24h, 7d)."""
    data = _build(now, window_name, tenants)
    data["tables"] = tables(data)
    return data


def _over_window(now: dt.datetime, name: str, tenants: frozenset[str] | None) -> dict[str, Any]:
    """What depends on the window: the percentiles and the series (the heavy part of a wide window)."""
    window = measures.WINDOWS[name]
    since, step = now - window, _step(window)
    return {
        "series_at": _epoch(now), "step_seconds": step,
        "percentiles": _percentile_rows(measures.window_percentiles(now, name, tenants)),
        "percentiles_basis": measures.basis(name),
        "series": {
            "depth": _depth_series(since, tenants, step),
            # jobs finished per minute: a point's finished jobs (per-minute samples summed) over its minutes
            "throughput": _sampled(Metric.FINISHED_PER_MINUTE, since, tenants, step, per_label="SUM",
                                   per_point="SUM", scale=60 / step),
            "dead_letters": _sampled(Metric.DEAD_LETTERS, since, tenants, step, per_label="SUM", per_point="MAX"),
            "outbox_lag": _sampled(Metric.OUTBOX_LAG_SECONDS, since, tenants, step, per_label="MAX",
                                   per_point="MAX").get("", []),
            "drains_alive": _sampled(Metric.DRAINS_ALIVE, since, None, step, per_label="SUM", per_point="MIN"),
            "refusals": {"refused": _sampled(Metric.REPROCESS_REFUSALS, since, tenants, step, per_label="SUM",
                                             per_point="SUM").get("", [])},
        },
    }


def _window_part(now: dt.datetime, name: str, tenants: frozenset[str] | None) -> dict[str, Any]:
    """``_over_window``, kept ``DASHBOARD_CACHE_SECONDS`` in this process's cache for the wide windows
    (their points are 12 and 84 minutes wide: a few seconds' staleness never shows, and a refresh every
    5 s from each open page need not re-read the folded hours and slots). The last hour is always read
    afresh."""
    seconds = settings.RELAYOPS["DASHBOARD_CACHE_SECONDS"]
    if name == measures.DEFAULT_WINDOW or seconds <= 0:
        return _over_window(now, name, tenants)
    scope = "*" if tenants is None else ",".join(sorted(tenants))
    key = f"relayops:dashboard:{name}:{hashlib.sha256(scope.encode()).hexdigest()}"
    part = cache.get(key)
    if part is None:
        part = _over_window(now, name, tenants)
        cache.set(key, part, seconds)
    return part


def _build(now: dt.datetime, window_name: str, tenants: frozenset[str] | None) -> dict[str, Any]:
    name = measures.window_of(window_name)
    since = now - measures.WINDOWS[name]
    tenant_rows = _tenant_rows(now, tenants)
    nodes = _nodes(now)
    return {
        "now": _epoch(now), "window": name, "windows": list(measures.WINDOWS),
        "window_seconds": int(measures.WINDOWS[name].total_seconds()),
        "paused_tenants": paused_tenants(tenants),
        "tenants": tenant_rows,
        "totals": {
            "queued": sum(r["queued"] for r in tenant_rows), "leased": sum(r["leased"] for r in tenant_rows),
            "due": sum(r["due"] for r in tenant_rows),
            "outbox_lag_seconds": max((r["outbox_lag_seconds"] for r in tenant_rows
                                       if r["outbox_lag_seconds"] is not None), default=None),
            "drains_alive": sum(n["drains_alive"] for n in nodes),
            "nodes_alive": sum(1 for n in nodes if n["drains_alive"]),
            "refusals": _refusals(since, tenants),
        },
        "dead_letters": _dead_letters(tenants),
        "nodes": nodes,
        "oldest_due": _oldest_due(now, tenants),
        "chart_measures": [str(m) for m in CHART_MEASURES],
        **_window_part(now, name, tenants),
    }


def _s(value: float | None) -> str:
    """Seconds as the dashboard prints them (its script prints what this returns)."""
    return "-" if value is None else f"{value:.3f} s"


def tables(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The numbers beside the charts, as text cells: the page renders them, and its script replaces
    them with the same cells from each refresh."""
    paused = set(data["paused_tenants"])
    throughput = {outcome: points[-1][1] if points else 0.0 for outcome, points in data["series"]["throughput"].items()}
    return {
        "depth": {"columns": ["tenant", "queued", "leased", "due", "oldest due waited", "oldest live job age",
                              "outbox pending", "outbox lag"],
                  "rows": [[r["tenant"] + (" (intake paused)" if r["tenant"] in paused else ""), str(r["queued"]),
                            str(r["leased"]), str(r["due"]), _s(r["oldest_due_seconds"]),
                            _s(r["oldest_live_age_seconds"]), str(r["outbox_pending"]), _s(r["outbox_lag_seconds"])]
                           for r in data["tenants"]]},
        "throughput": {"columns": ["outcome", "finished per minute (latest point)"],
                       "rows": [[outcome, f"{rate:.3f}"] for outcome, rate in sorted(throughput.items())]},
        "percentiles": {"columns": ["measure", "tenant", "count", "p50", "p95", "p99", "percentiles"],
                        "rows": [[r["label"], r["tenant"], str(r["count"]), _s(r["p50"]), _s(r["p95"]), _s(r["p99"]),
                                  data["percentiles_basis"]["text"]] for r in data["percentiles"]]},
        "dead_letters": {"columns": ["reason", "dead letters"],
                         "rows": [[r["reason"], str(r["count"])] for r in data["dead_letters"]]},
        "outbox": {"columns": ["measure", "now"],
                   "rows": [["oldest unpublished event (outbox lag)", _s(data["totals"]["outbox_lag_seconds"])],
                            ["unpublished events", str(sum(r["outbox_pending"] for r in data["tenants"]))]]},
        "nodes": {"columns": ["node", "drains alive", "last seen", "last progress", "stopped"],
                  "rows": [[n["node"], str(n["drains_alive"]), _s(n["last_seen_seconds"]),
                            _s(n["last_progress_seconds"]), _s(n["stopped_seconds"])] for n in data["nodes"]]},
        "refusals": {"columns": ["measure", "in the window"],
                     "rows": [["reprocesses refused by the rate limit", str(data["totals"]["refusals"])]]},
    }
