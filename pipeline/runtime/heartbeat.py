"""A lease's heartbeat: a thread with its own connection that extends the lease at a fraction of it.

A connection fault is not the end of a lease: the thread drops its connection (the next beat opens a
fresh one) and beats again soon. And a worker never outlives its lease unknowingly: once the lease it
last extended has run out without a successful beat, ``check()`` raises, so the job stops at its
next checkpoint before another worker may take it over (a job never runs twice at once because a
connection dropped).
"""

from __future__ import annotations

import threading

from django.db import connection

from pipeline import queue, reconnect
from pipeline.clock import Clock, system_clock
from pipeline.errors import LeaseLostError, StaleLeaseError
from relayops.logging import get_logger

log = get_logger(__name__)

RETRY_SECONDS = 0.1  # the first retry after a failed beat; doubles up to a third of the lease


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
        """Raise LeaseLostError once the lease was taken, or ran out without a beat reaching the database."""
        if self._lost.is_set():
            raise LeaseLostError(f"job {self.lease.job_id}: lease fence {self.lease.fence} lost")
        if self.clock.now() >= self.lease.lease_until:
            raise LeaseLostError(f"job {self.lease.job_id}: lease fence {self.lease.fence} ran out unextended")

    def _run(self) -> None:
        interval = self.lease_seconds / 3
        wait = interval
        try:
            while not self._stop.wait(wait):
                try:
                    self.lease = queue.heartbeat(self.lease, lease_seconds=self.lease_seconds, clock=self.clock)
                    wait = interval
                except StaleLeaseError:
                    log.warning("lease.lost", job_id=self.lease.job_id, fence=self.lease.fence)
                    self._lost.set()
                    return
                except Exception as exc:  # a database blip: a fresh connection, and beat again soon
                    log.warning("lease.heartbeat_failed", job_id=self.lease.job_id, error_type=type(exc).__name__)
                    reconnect.drop_connection()
                    wait = min(RETRY_SECONDS if wait == interval else wait * 2, interval)
        finally:
            connection.close()
