"""The once-a-minute sweeper: rescue, prune, sample (queue depth and the other measures), fold the
measures into their running totals. Each part is a ``run_once(now)`` class.

Workers run it between their drains (pipeline.runtime.host): ``run_if_due`` takes the fleet's turn
with one guarded UPDATE, so one worker of one node sweeps per interval, whichever is free first. A
sweep that is late, doubled or skipped only delays maintenance: drains find due work on their own and
every part is idempotent.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings

from pipeline.maintenance.pruner import Batches, ConsumerMemoryPruner, OutboxPruner, SamplePruner, check_retention
from pipeline.maintenance.rescuer import LeaseRescuer
from pipeline.maintenance.sampler import DepthSampler, MetricSampler
from pipeline.maintenance.totals import TotalsFolder
from pipeline.models import SweepTurn
from pipeline.runtime import liveness

SWEEP_EVERY = dt.timedelta(minutes=1)
TURN = "sweeper"


@dataclass(frozen=True)
class SweepReport:
    dead_lettered: int
    cancelled: int
    outbox_pruned: int
    memory_pruned: int
    samples: int
    presences_pruned: int
    metric_samples: int = 0
    metric_samples_pruned: int = 0
    totals_folded: int = 0


class Sweeper:
    def __init__(
        self, rescuer: LeaseRescuer, outbox_pruner: OutboxPruner, memory_pruner: ConsumerMemoryPruner,
        sampler: DepthSampler, metric_sampler: MetricSampler | None = None,
        sample_pruner: SamplePruner | None = None, folder: TotalsFolder | None = None,
    ) -> None:
        self.rescuer = rescuer
        self.outbox_pruner = outbox_pruner
        self.memory_pruner = memory_pruner
        self.sampler = sampler
        self.metric_sampler = metric_sampler
        self.sample_pruner = sample_pruner
        self.folder = folder

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
            MetricSampler(SWEEP_EVERY),
            SamplePruner(dt.timedelta(days=options["METRIC_SAMPLE_RETENTION_DAYS"]), batches),
            TotalsFolder(),
        )

    def run_once(self, now: dt.datetime) -> SweepReport:
        rescued = self.rescuer.run_once(now)
        return SweepReport(
            dead_lettered=rescued.dead_lettered, cancelled=rescued.cancelled,
            outbox_pruned=self.outbox_pruner.run_once(now), memory_pruned=self.memory_pruner.run_once(now),
            samples=self.sampler.run_once(now), presences_pruned=liveness.prune(now),
            metric_samples=self.metric_sampler.run_once(now) if self.metric_sampler else 0,
            metric_samples_pruned=self.sample_pruner.run_once(now) if self.sample_pruner else 0,
            totals_folded=self.folder.run_once(now) if self.folder else 0,
        )


def take_turn(now: dt.datetime, every: dt.timedelta = SWEEP_EVERY) -> bool:
    """True for exactly one caller per ``every`` across the fleet: the one whose guarded UPDATE moved
    the turn's time (concurrent callers wait on the row and then find it already moved)."""
    if SweepTurn.objects.filter(name=TURN, taken_at__lte=now - every).update(taken_at=now):
        return True
    _, created = SweepTurn.objects.get_or_create(name=TURN, defaults={"taken_at": now})
    return created


def run_if_due(now: dt.datetime, every: dt.timedelta = SWEEP_EVERY) -> SweepReport | None:
    """Sweep if this caller takes the turn; None if another did within ``every``."""
    return Sweeper.from_settings().run_once(now) if take_turn(now, every) else None
