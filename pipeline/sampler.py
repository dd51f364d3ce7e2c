"""The queue-depth sampler: one row per tenant per run (each minute), kept for a retention window."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, F, Min, Q

from pipeline.models import Job, OutboxEvent, QueueDepthSample
from pipeline.states import JobStatus
from relayops.logging import get_logger

log = get_logger(__name__)


class DepthSampler:
    """``run_once(now)`` records each tenant's queued, leased and due jobs and pending events."""

    def __init__(self, retention: dt.timedelta) -> None:
        if retention <= dt.timedelta(0):
            raise ValueError("retention must be positive")
        self.retention = retention

    def run_once(self, now: dt.datetime) -> int:
        due = Q(visible_at__lte=now, attempt__lt=F("max_attempts"))
        jobs: dict[str, dict[str, Any]] = {
            row["tenant"]: dict(row)
            for row in Job.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.LEASED)).values("tenant").annotate(
                queued=Count("pk", filter=Q(status=JobStatus.QUEUED)),
                leased=Count("pk", filter=Q(status=JobStatus.LEASED)),
                due=Count("pk", filter=due),
                oldest_due=Min("visible_at", filter=due),
            )
        }
        pending: dict[str, int] = dict(
            OutboxEvent.objects.filter(published_at__isnull=True).values("tenant").annotate(n=Count("pk"))
            .values_list("tenant", "n")
        )
        empty: dict[str, Any] = {"queued": 0, "leased": 0, "due": 0, "oldest_due": None}
        samples = [
            QueueDepthSample(
                sampled_at=now, tenant=tenant, queued=row["queued"], leased=row["leased"], due=row["due"],
                oldest_due_seconds=_age(now, row["oldest_due"]), outbox_pending=pending.get(tenant, 0),
            )
            for tenant in sorted(set(jobs) | set(pending))
            for row in [jobs.get(tenant, empty)]
        ]
        QueueDepthSample.objects.bulk_create(samples)
        QueueDepthSample.objects.filter(sampled_at__lt=now - self.retention).delete()
        for sample in samples:
            log.info("queue.depth", tenant=sample.tenant, queued=sample.queued, leased=sample.leased,
                     due=sample.due, oldest_due_seconds=sample.oldest_due_seconds,
                     outbox_pending=sample.outbox_pending)
        return len(samples)


def _age(now: dt.datetime, since: dt.datetime | None) -> float | None:
    return None if since is None else max((now - since).total_seconds(), 0.0)
