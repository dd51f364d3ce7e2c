"""The once-a-minute sweeper: rescue, re-kick, prune, sample. Each part is a ``run_once(now)`` class.

django-q2's Schedule runs it (``pipeline.runtime.tasks.sweep``); a sweep that is late, doubled or skipped
only delays work, because drains find due work on their own and every part is idempotent.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings

from pipeline.maintenance.pruner import Batches, ConsumerMemoryPruner, OutboxPruner, check_retention
from pipeline.maintenance.rescuer import LeaseRescuer
from pipeline.maintenance.sampler import DepthSampler
from pipeline.models import Job, OutboxEvent
from pipeline.runtime import liveness, wakeups


@dataclass(frozen=True)
class SweepReport:
    dead_lettered: int
    cancelled: int
    kicked: bool
    outbox_pruned: int
    memory_pruned: int
    samples: int
    presences_pruned: int


class Sweeper:
    def __init__(
        self, rescuer: LeaseRescuer, outbox_pruner: OutboxPruner, memory_pruner: ConsumerMemoryPruner,
        sampler: DepthSampler,
    ) -> None:
        self.rescuer = rescuer
        self.outbox_pruner = outbox_pruner
        self.memory_pruner = memory_pruner
        self.sampler = sampler

    @classmethod
    def from_settings(cls) -> "Sweeper":
        options = settings.RELAYOPS
        check_retention(options["OUTBOX_RETENTION_DAYS"], options["CONSUMER_DEDUPE_RETENTION_DAYS"])
        batches = Batches(options["PRUNE_BATCH_SIZE"], options["PRUNE_MAX_BATCHES"])
        return cls(
            LeaseRescuer(),
            OutboxPruner(dt.timedelta(days=options["OUTBOX_RETENTION_DAYS"]), batches),
            ConsumerMemoryPruner(dt.timedelta(days=options["CONSUMER_DEDUPE_RETENTION_DAYS"]), batches),
            DepthSampler(dt.timedelta(days=options["DEPTH_SAMPLE_RETENTION_DAYS"])),
        )

    def run_once(self, now: dt.datetime) -> SweepReport:
        rescued = self.rescuer.run_once(now)
        kicked = wakeups.kick_drain() if work_is_due(now) else False
        return SweepReport(
            dead_lettered=rescued.dead_lettered, cancelled=rescued.cancelled, kicked=kicked,
            outbox_pruned=self.outbox_pruner.run_once(now), memory_pruned=self.memory_pruner.run_once(now),
            samples=self.sampler.run_once(now), presences_pruned=liveness.prune(now),
        )


def work_is_due(now: dt.datetime) -> bool:
    """A claimable job or a claimable unpublished event exists (a drain would find something)."""
    return Job.objects.claimable(now).exists() or OutboxEvent.objects.pending(now).exists()
