"""``GET /metrics``: Prometheus' text format, written by prometheus-client from the database at each scrape.

Why the database and not in-process counters: jobs are leased, committed and reviewed by the workers
of any number of qcluster nodes, and any of several web processes answers the scrape. A counter kept in
one process would count only that process's share (and reset when it restarts); prometheus-client's
multiprocess mode shares files between the processes of one machine only. The tables every node
writes hold the truth, so a collector reads them at scrape time: every web process answers the same
numbers whichever one Prometheus reaches. Counters and histograms are totals over rows that are
never deleted (jobs, attempts, reviews, dead letters), so they only grow, as Prometheus expects.

Tenant is a label; a document id, an idempotency key or any content never is. Nodes are labels of
``relayops_drains_alive`` only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Min, Q
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from dlq.models import ReprocessRefusal
from pipeline import sql
from pipeline.clock import Clock, seconds_since, system_clock
from pipeline.models import CLAIMABLE_FROM, DeadLetter, DrainPresence, Job, OutboxEvent
from pipeline.states import LIVE_STATUSES, TERMINAL_STATUSES

ALIVE_WITHIN = dt.timedelta(minutes=1)

# Upper bounds (seconds) of the histograms' buckets: queue waits of milliseconds to an hour,
# inference of a rules extractor (milliseconds) to an LLM's minutes, reviews of seconds to a week.
QUEUE_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
INFERENCE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
REVIEW_BUCKETS = (1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 8 * 3600, 86400, 3 * 86400, 7 * 86400)


@dataclass(frozen=True)
class HistogramSpec:
    name: str
    documentation: str
    value: str  # the observation, in seconds (NULL: not observed)
    buckets: Sequence[float]


@dataclass(frozen=True)
class HistogramGroup:
    """Histograms read from the same rows in one pass: FROM ``rows`` (aliased ``a``, with a.tenant)."""

    rows: str
    specs: Sequence[HistogramSpec]


def _seconds_between(later: str, earlier: str) -> str:
    if connection.vendor == "postgresql":
        return f"CASE WHEN {earlier} IS NOT NULL THEN GREATEST(EXTRACT(EPOCH FROM ({later} - {earlier})), 0) END"
    return f"MAX((julianday({later}) - julianday({earlier})) * 86400.0, 0)"


def histogram_groups() -> list[HistogramGroup]:
    return [
        HistogramGroup("pipeline_attempt a", [
            HistogramSpec("relayops_queue_wait_seconds", "Per attempt: from when its job became due to its lease.",
                          _seconds_between("a.leased_at", "a.due_at"), QUEUE_WAIT_BUCKETS),
            HistogramSpec("relayops_inference_seconds", "Per attempt: the extractor's own time.",
                          "a.inference_seconds", INFERENCE_BUCKETS),
            HistogramSpec("relayops_commit_seconds", "Per committed attempt: the commit transaction.",
                          "a.commit_seconds", COMMIT_BUCKETS),
        ]),
        HistogramGroup("pipeline_review a JOIN pipeline_job j ON j.id = a.job_id WHERE a.decided_at IS NOT NULL", [
            HistogramSpec("relayops_review_wait_seconds", "Per decided review: from handoff to decision.",
                          _seconds_between("a.decided_at", "a.created_at"), REVIEW_BUCKETS),
            HistogramSpec("relayops_end_to_end_seconds",
                          "Per decided review: from ingest (the job's creation) to decision.",
                          _seconds_between("a.decided_at", "j.created_at"), REVIEW_BUCKETS),
        ]),
    ]


def histograms(group: HistogramGroup) -> list[HistogramMetricFamily]:
    """Cumulative histograms per tenant, every one of ``group`` counted by one statement."""
    inner = ", ".join(f"{spec.value} AS v{i}" for i, spec in enumerate(group.specs))
    columns = []
    for i, spec in enumerate(group.specs):
        columns.append(f"COUNT(v{i}) AS n{i}, COALESCE(SUM(v{i}), 0) AS s{i}")
        columns += [f"COUNT(CASE WHEN v{i} <= {bound!r} THEN 1 END) AS b{i}_{j}" for j, bound in enumerate(spec.buckets)]
    statement = (f"SELECT w.tenant, {', '.join(columns)} FROM (SELECT a.tenant, {inner} FROM {group.rows}) AS w "
                 f"GROUP BY w.tenant ORDER BY w.tenant")
    families = [HistogramMetricFamily(spec.name, spec.documentation, labels=["tenant"]) for spec in group.specs]
    for row in sql.fetch(statement, {}):
        for i, (spec, family) in enumerate(zip(group.specs, families)):
            if not row[f"n{i}"]:
                continue
            buckets = [(floatToGoString(bound), int(row[f"b{i}_{j}"])) for j, bound in enumerate(spec.buckets)]
            buckets.append(("+Inf", int(row[f"n{i}"])))
            family.add_metric([row["tenant"]], buckets, float(row[f"s{i}"]))
    return families


class DatabaseCollector(Collector):
    """Every RelayOps metric, read from the database when Prometheus scrapes."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock.now()
        yield from self._jobs(now)
        for group in histogram_groups():
            yield from histograms(group)
        yield self._dead_letters()
        yield self._refusals()
        yield self._outbox_lag(now)
        yield self._drains(now)

    def _jobs(self, now: dt.datetime) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("relayops_jobs", "Jobs by tenant and status, now.", labels=["tenant", "status"])
        finished = CounterMetricFamily("relayops_jobs_finished", "Jobs finished, by tenant and outcome.",
                                       labels=["tenant", "outcome"])
        for row in Job.objects.values("tenant", "status").annotate(n=Count("pk")).order_by("tenant", "status"):
            jobs.add_metric([row["tenant"], row["status"]], row["n"])
            if row["status"] in TERMINAL_STATUSES:
                finished.add_metric([row["tenant"], row["status"]], row["n"])
        yield jobs
        yield finished
        age = GaugeMetricFamily("relayops_oldest_live_job_age_seconds",
                                "Age of the oldest queued or leased job, by tenant.", labels=["tenant"])
        live = Job.objects.filter(status__in=LIVE_STATUSES).values("tenant").annotate(at=Min("created_at"))
        for oldest in live.order_by("tenant"):
            age.add_metric([oldest["tenant"]], seconds_since(now, oldest["at"]) or 0.0)
        yield age
        due = GaugeMetricFamily("relayops_oldest_due_seconds",
                                "How long the longest-waiting claimable job has been due, by tenant.", labels=["tenant"])
        for first in Job.objects.claimable(now).values("tenant").annotate(at=Min(CLAIMABLE_FROM)).order_by("tenant"):
            due.add_metric([first["tenant"]], seconds_since(now, first["at"]) or 0.0)
        yield due

    def _dead_letters(self) -> Metric:
        family = CounterMetricFamily("relayops_dead_letters", "Dead letters, by tenant and reason.",
                                     labels=["tenant", "reason"])
        rows = DeadLetter.objects.values("tenant", "reason_code").annotate(n=Count("pk")).order_by("tenant", "reason_code")
        for row in rows:
            family.add_metric([row["tenant"], row["reason_code"]], row["n"])
        return family

    def _refusals(self) -> Metric:
        family = CounterMetricFamily("relayops_reprocess_refusals", "Reprocesses the rate limit refused, by tenant.",
                                     labels=["tenant"])
        for row in ReprocessRefusal.objects.values("tenant").annotate(n=Count("pk")).order_by("tenant"):
            family.add_metric([row["tenant"]], row["n"])
        return family

    def _outbox_lag(self, now: dt.datetime) -> Metric:
        family = GaugeMetricFamily("relayops_outbox_lag_seconds",
                                   "Age of the oldest unpublished outbox event, by tenant (absent: none pending).",
                                   labels=["tenant"])
        rows = OutboxEvent.objects.unpublished().values("tenant").annotate(at=Min("created_at")).order_by("tenant")
        for row in rows:
            family.add_metric([row["tenant"]], seconds_since(now, row["at"]) or 0.0)
        return family

    def _drains(self, now: dt.datetime) -> Metric:
        family = GaugeMetricFamily("relayops_drains_alive",
                                   "Drains seen in the last minute and not gone, by node.", labels=["node"])
        alive = Q(seen_at__gte=now - ALIVE_WITHIN, gone_at__isnull=True)
        for row in DrainPresence.objects.values("node").annotate(n=Count("pk", filter=alive)).order_by("node"):
            family.add_metric([row["node"]], row["n"])
        return family


def exposition(clock: Clock = system_clock, accept: str = "") -> tuple[bytes, str]:
    """The whole scrape and its content type: Prometheus' text format, or OpenMetrics when the
    scraper's ``Accept`` asks for it (prometheus-client chooses)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(clock))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type
