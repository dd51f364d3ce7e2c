"""``GET /metrics``: Prometheus' text format, written by prometheus-client from the database at each scrape.

Why the database and not in-process counters: jobs are leased, committed and reviewed by the workers
of any number of qcluster nodes, and any of several web processes answers the scrape. A counter kept in
one process would count only that process's share (and reset when it restarts); prometheus-client's
multiprocess mode shares files between the processes of one machine only. The tables every node
writes hold the truth, so a collector reads them at scrape time: every web process answers the same
numbers whichever one Prometheus reaches. Counters are totals over rows that are never deleted
(jobs, dead letters, refusals); the histograms are the running totals the sweeper folds the ended
attempts and decided reviews into (``MeasureTotal``), plus those settled since its last fold, read in
one snapshot. All only grow, as Prometheus expects. The histograms cost a scrape a few rows per tenant
whatever the history; the job counts too: the sweeper counts the finished jobs into ``JobTotal`` under a
fold mark, and a scrape adds the jobs finished since and the live ones, in one snapshot.

Tenant is a label; a document id, an idempotency key or any content never is. Nodes are labels of
``relayops_drains_alive`` only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from django.db.models import Count, Min, Q
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from dlq.models import ReprocessRefusal
from pipeline.clock import Clock, seconds_since, system_clock
from pipeline.maintenance import totals
from pipeline.measures import BOUNDS, Measure
from pipeline.models import CLAIMABLE_FROM, DeadLetter, DrainPresence, Job, OutboxEvent
from pipeline.states import LIVE_STATUSES, TERMINAL_STATUSES

ALIVE_WITHIN = dt.timedelta(minutes=1)

# The histograms /metrics exposes: name and help per measure (the buckets: pipeline.measures.BOUNDS).
HISTOGRAMS = {
    Measure.QUEUE_WAIT: ("relayops_queue_wait_seconds", "Per attempt: from when its job became due to its lease."),
    Measure.INFERENCE: ("relayops_inference_seconds", "Per attempt: the extractor's own time."),
    Measure.COMMIT: ("relayops_commit_seconds", "Per committed attempt: the commit transaction."),
    Measure.REVIEW_WAIT: ("relayops_review_wait_seconds", "Per decided review: from handoff to decision."),
    Measure.END_TO_END: ("relayops_end_to_end_seconds",
                         "Per decided review: from ingest (the job's creation) to decision."),
}


def histogram_families() -> list[HistogramMetricFamily]:
    """One cumulative histogram per measure, a series per tenant: the running totals plus what settled
    since their last fold (pipeline.maintenance.totals), observed when an attempt ends or a review is
    decided."""
    families = {m: HistogramMetricFamily(name, text, labels=["tenant"]) for m, (name, text) in HISTOGRAMS.items()}
    for (measure, tenant), histogram in totals.read().items():
        buckets = [(floatToGoString(bound), count) for bound, count in zip(BOUNDS[measure], histogram.buckets)]
        buckets.append(("+Inf", histogram.count))
        families[measure].add_metric([tenant], buckets, histogram.total)
    return list(families.values())


class DatabaseCollector(Collector):
    """Every RelayOps metric, read from the database when Prometheus scrapes."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock.now()
        yield from self._jobs(now)
        yield from histogram_families()
        yield self._dead_letters()
        yield self._refusals()
        yield self._outbox_lag(now)
        yield self._drains(now)

    def _jobs(self, now: dt.datetime) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("relayops_jobs", "Jobs by tenant and status, now.", labels=["tenant", "status"])
        finished = CounterMetricFamily("relayops_jobs_finished", "Jobs finished, by tenant and outcome.",
                                       labels=["tenant", "outcome"])
        for (tenant, status), n in totals.job_counts().items():
            jobs.add_metric([tenant, status], n)
            if status in TERMINAL_STATUSES:
                finished.add_metric([tenant, status], n)
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
