"""The queue-depth sampler: one row per tenant per run (each minute), kept for a retention window."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, Min, Q

from pipeline.clock import seconds_since
from pipeline.models import CLAIMABLE_FROM, Job, OutboxEvent, QueueDepthSample
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

