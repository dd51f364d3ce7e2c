"""A lease's heartbeat: a thread with its own connection that extends the lease at a fraction of it."""

from __future__ import annotations

import threading

from django.db import connection

from pipeline import queue
from pipeline.clock import Clock, system_clock
from pipeline.errors import LeaseLostError, StaleLeaseError
from relayops.logging import get_logger

log = get_logger(__name__)

class Heartbeat:
    """Extends ``lease`` every ``lease_seconds / 3`` until stopped; ``check()`` raises once it is lost."""

    def __init__(self, lease: queue.Lease, *, lease_seconds: float, clock: Clock = system_clock) -> None:
        self.lease = lease
        self.lease_seconds = lease_seconds
        self.clock = clock
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{lease.job_id}", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def check(self) -> None:
        if self._lost.is_set():
            raise LeaseLostError(f"job {self.lease.job_id}: lease fence {self.lease.fence} lost")

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.lease_seconds / 3):
                try:
                    self.lease = queue.heartbeat(self.lease, lease_seconds=self.lease_seconds, clock=self.clock)
                except StaleLeaseError:
                    log.warning("lease.lost", job_id=self.lease.job_id, fence=self.lease.fence)
                    self._lost.set()
                    return
                except Exception as exc:  # a database blip: keep trying until the lease runs out
                    log.warning("lease.heartbeat_failed", job_id=self.lease.job_id, error_type=type(exc).__name__)
        finally:
            connection.close()
