"""The samplers: queue depth (one row per tenant per run, each minute) and the other measures drawn over
time (``MetricSample``); both kept for a retention window, then pruned."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from django.db.models import Count, Min, Q

from pipeline.clock import seconds_since
from pipeline.models import (
    CLAIMABLE_FROM, DeadLetter, DrainPresence, Job, Metric, MetricSample, OutboxEvent, QueueDepthSample,
)
from relayops.errors import InvalidInputError
from pipeline.states import JobStatus
from relayops.logging import get_logger

log = get_logger(__name__)


class DepthSampler:
    """``run_once(now)`` records each tenant's queued, leased and due jobs and pending events."""

    def __init__(self, retention: dt.timedelta) -> None:
        if not isinstance(retention, dt.timedelta) or retention <= dt.timedelta(0):
            raise InvalidInputError("retention", "must be a positive timedelta")
        self.retention = retention

    def run_once(self, now: dt.datetime) -> int:
        live: dict[str, dict[str, Any]] = {
            row["tenant"]: dict(row)
            for row in Job.objects.live().values("tenant").annotate(
                queued=Count("pk", filter=Q(status=JobStatus.QUEUED)),
                leased=Count("pk", filter=Q(status=JobStatus.LEASED)),
            )
        }
        due: dict[str, dict[str, Any]] = {
            row["tenant"]: dict(row)
            for row in Job.objects.claimable(now).values("tenant").annotate(due=Count("pk"), oldest=Min(CLAIMABLE_FROM))
        }
        pending: dict[str, int] = dict(
            OutboxEvent.objects.unpublished().values("tenant").annotate(n=Count("pk")).values_list("tenant", "n")
        )
        samples = [
            QueueDepthSample(
                sampled_at=now, tenant=tenant, queued=live.get(tenant, {}).get("queued", 0),
                leased=live.get(tenant, {}).get("leased", 0), due=due.get(tenant, {}).get("due", 0),
                oldest_due_seconds=seconds_since(now, due.get(tenant, {}).get("oldest")),
                outbox_pending=pending.get(tenant, 0),
            )
            for tenant in sorted(set(live) | set(pending))
        ]
        QueueDepthSample.objects.bulk_create(samples)
        QueueDepthSample.objects.filter(sampled_at__lt=now - self.retention).delete()
        for sample in samples:
            log.info("queue.depth", tenant=sample.tenant, queued=sample.queued, leased=sample.leased,
                     due=sample.due, oldest_due_seconds=sample.oldest_due_seconds,
                     outbox_pending=sample.outbox_pending)
        return len(samples)



# Measures other apps sample (the dlq app: reprocess refusals): ``source(since, now)`` gives
# (tenant, label, value) rows. Registered at start-up (an AppConfig.ready), so pipeline imports no app above it.
Source = Callable[[dt.datetime, dt.datetime], Iterable[tuple[str, str, float]]]
_SOURCES: dict[str, Source] = {}


def register_source(metric: Metric, source: Source) -> None:
    if metric not in Metric.values:
        raise InvalidInputError("metric", f"must be one of {Metric.values}")
    _SOURCES[str(metric)] = source


class MetricSampler:
    """``run_once(now)`` records, per tenant: jobs finished in the interval before ``now`` (per minute, by
    outcome), dead letters by reason so far, the outbox lag (age of the oldest unpublished event),
    the registered measures (reprocess refusals in the interval); and, per node, its drains alive
    (seen within ``alive_within`` and not gone). Pruning is the sample pruner's (``pruner.SamplePruner``)."""

    def __init__(self, every: dt.timedelta = dt.timedelta(minutes=1),
                 alive_within: dt.timedelta = dt.timedelta(minutes=1)) -> None:
        for name, value in (("every", every), ("alive_within", alive_within)):
            if not isinstance(value, dt.timedelta) or value <= dt.timedelta(0):
                raise InvalidInputError(name, "must be a positive timedelta")
        self.every = every
        self.alive_within = alive_within

    def rows(self, now: dt.datetime) -> list[MetricSample]:
        since = now - self.every
        minutes = self.every.total_seconds() / 60
        samples: list[MetricSample] = []

        def add(metric: Metric | str, tenant: str, label: str, value: float) -> None:
            samples.append(MetricSample(sampled_at=now, metric=metric, tenant=tenant, label=label[:100],
                                        value=float(value)))

        finished = Job.objects.filter(finished_at__gt=since, finished_at__lte=now)
        for row in finished.values("tenant", "status").annotate(n=Count("pk")).order_by("tenant", "status"):
            add(Metric.FINISHED_PER_MINUTE, row["tenant"], row["status"], row["n"] / minutes)
        letters = DeadLetter.objects.values("tenant", "reason_code").annotate(n=Count("pk"))
        for letter in letters.order_by("tenant", "reason_code"):
            add(Metric.DEAD_LETTERS, letter["tenant"], letter["reason_code"], letter["n"])
        events = OutboxEvent.objects.unpublished().values("tenant").annotate(at=Min("created_at"))
        for event in events.order_by("tenant"):
            add(Metric.OUTBOX_LAG_SECONDS, event["tenant"], "", seconds_since(now, event["at"]) or 0.0)
        for metric, source in sorted(_SOURCES.items()):
            for tenant, label, value in source(since, now):
                add(metric, tenant, label, value)
        alive = Q(seen_at__gte=now - self.alive_within, gone_at__isnull=True)
        for node in DrainPresence.objects.values("node").annotate(n=Count("pk", filter=alive)).order_by("node"):
            add(Metric.DRAINS_ALIVE, "", node["node"], node["n"])
        return samples

    def run_once(self, now: dt.datetime) -> int:
        samples = self.rows(now)
        MetricSample.objects.bulk_create(samples)
        return len(samples)
