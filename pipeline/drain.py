"""A drain: a bounded loop that runs jobs and publishes the outbox, parked on LISTEN/NOTIFY while idle.

A drain knows no job in advance: it leases from the job table (``process_once``) and claims from the
outbox (``relay.publish_pending``) until its budget is spent or a stop is requested. While idle it
waits for a doorbell NOTIFY, the next job's ``visible_at`` or a claim's expiry, whichever is first,
and looks anyway every ``poll_seconds`` (the safety net; SQLite has no NOTIFY and only polls).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Callable

from django.db import DatabaseError, connection
from django.db.models import F, Min

from pipeline import doorbell, liveness, relay
from pipeline.clock import Clock, system_clock
from pipeline.crash import NO_CRASH, CrashInjector
from pipeline.models import Job, OutboxEvent
from pipeline.shutdown import STATE, ShutdownInterrupt, StopState, release_held
from pipeline.states import LIVE_STATUSES
from pipeline.worker import process_once
from relayops.logging import get_logger

log = get_logger(__name__)

WAIT_SLICE_SECONDS = 0.25  # a parked drain notices a stop request this fast
MIN_WAIT_SECONDS = 0.02  # floor when a due row is held by another claimer: no busy loop
BEAT_IDLE_SECONDS = 5.0
BEAT_BUSY_SECONDS = 1.0


@dataclass
class DrainReport:
    jobs: int = 0  # jobs leased and finished (committed, retried, dead-lettered, cancelled or lost)
    published: int = 0
    wakeups: int = 0  # NOTIFYs that woke the drain
    released: int = 0  # leases given back on an interrupted stop
    ended: str = ""  # budget | stopped | interrupted


class Drain:
    """Runs jobs and/or the relay for ``max_seconds``; ``run()`` returns what it did."""

    def __init__(
        self,
        worker_id: str,
        *,
        max_seconds: float,
        jobs: bool = True,
        outbox: bool = True,
        poll_seconds: float = 5.0,
        claim_seconds: float = relay.DEFAULT_CLAIM_SECONDS,
        crash: CrashInjector = NO_CRASH,
        stop: StopState = STATE,
        clock: Clock = system_clock,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (jobs or outbox):
            raise ValueError("a drain runs jobs, the outbox, or both")
        if not 0 < max_seconds <= 3600 or not 0 < poll_seconds <= 60:
            raise ValueError("max_seconds must be in (0, 3600] and poll_seconds in (0, 60]")
        self.worker_id = worker_id
        self.max_seconds = max_seconds
        self.jobs = jobs
        self.outbox = outbox
        self.poll_seconds = poll_seconds
        self.claim_seconds = claim_seconds
        self.crash = crash
        self.stop = stop
        self.clock = clock
        self.monotonic = monotonic
        self._beat_at = -1e9
        self.channels = [c for c, on in ((doorbell.JOBS, jobs), (doorbell.OUTBOX, outbox)) if on]

    def run(self) -> DrainReport:
        report = DrainReport()
        end = self.monotonic() + self.max_seconds
        listener = None
        self.stop.in_drain = True
        try:
            listener = doorbell.Listener.open(self.channels)  # before the first look: no NOTIFY slips by
            while not self.stop.requested.is_set():
                if self.monotonic() >= end:
                    report.ended = "budget"
                    break
                if not self._step(report):
                    self._park(listener, end, report)
            else:
                report.ended = "stopped"
        except ShutdownInterrupt:
            report.ended = "interrupted"
            report.released = release_held(self.worker_id)
        finally:
            self.stop.in_drain = False
            if listener is not None:
                listener.close()
        return report

    def _step(self, report: DrainReport) -> bool:
        """Run at most one job, then publish what is pending. True if anything was done."""
        worked = False
        try:
            if self.jobs:
                outcome = process_once(self.worker_id, crash=self.crash, clock=self.clock, heartbeat=True)
                if outcome.outcome != "idle":
                    report.jobs += 1
                    worked = True
            if self.outbox:
                relayed = relay.publish_pending(crash=self.crash, claim_seconds=self.claim_seconds, clock=self.clock)
                report.published += relayed.published
                worked = worked or relayed.claimed > 0
            self._beat(progress=worked)
        except DatabaseError as exc:  # a blip: drop the connection, wait a little, look again
            log.warning("drain.database_error", worker=self.worker_id, error_type=type(exc).__name__)
            connection.close()
            self.stop.requested.wait(1.0)
        return worked

    def _beat(self, *, progress: bool) -> None:
        now = self.monotonic()
        if now - self._beat_at >= (BEAT_BUSY_SECONDS if progress else BEAT_IDLE_SECONDS):
            liveness.beat(self.worker_id, self.clock.now(), progress=progress)
            self._beat_at = now

    def _park(self, listener: doorbell.Listener | None, end: float, report: DrainReport) -> None:
        """Wait for a NOTIFY, the next due row, the next beat or the end of the budget."""
        timeout = min(end - self.monotonic(), self.poll_seconds, self._seconds_until_due(self.clock.now()))
        deadline = self.monotonic() + max(timeout, MIN_WAIT_SECONDS)
        while not self.stop.requested.is_set():
            left = deadline - self.monotonic()
            if left <= 0:
                return
            if listener is None:
                self.stop.requested.wait(min(left, WAIT_SLICE_SECONDS))
            elif listener.wait(min(left, WAIT_SLICE_SECONDS)):
                report.wakeups += 1
                return

    def _seconds_until_due(self, now: dt.datetime) -> float:
        """Seconds until a job becomes claimable (a retry's backoff, a lease's expiry) or a relay
        claim expires; the poll interval when nothing is scheduled."""
        moments: list[dt.datetime | None] = []
        if self.jobs:
            moments.append(Job.objects.filter(status__in=LIVE_STATUSES, attempt__lt=F("max_attempts"))
                           .aggregate(at=Min("visible_at"))["at"])
        if self.outbox:
            moments.append(OutboxEvent.objects.filter(published_at__isnull=True)
                           .aggregate(at=Min("claimed_until"))["at"])
        due = [(m - now).total_seconds() for m in moments if m is not None]
        return max(min(due, default=self.poll_seconds), 0.0)
