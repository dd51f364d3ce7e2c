"""Lease heartbeats: one thread per worker process extends every lease the process holds.

A job's ``Heartbeat`` registers its lease with the process's beater while the job runs. The beater is
one daemon thread with a database connection of its own: it wakes when the earliest registered lease
is due (a third of that lease after its last extension) and extends every due lease in one statement
(``queue.heartbeat_many``), each to its own length. Most jobs end long before their first beat is
due, so a job costs no thread and no connection: registering is adding an entry to a set. The thread
starts with the process's first lease and lives as long as the process, parked while no lease is
registered; its connection opens at its first beat and is closed whenever the last lease is
unregistered, so an idle worker holds no connection for it. A forked child (django-q2 forks its
workers) gets a beater of its own: threads do not survive a fork, and the parent's leases are not the
child's to extend.

A connection fault is not the end of a lease: the beater drops its connection (the next beat opens a
fresh one) and beats again soon. And a worker never outlives its lease unknowingly: once the lease it
last extended has run out without a successful beat, ``check()`` raises, so the job stops at its
next checkpoint before another worker may take it over (a job never runs twice at once because a
connection dropped). A lease the beat finds taken over or ended is lost: ``check()`` raises at once.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import threading
import time

from pipeline import queue, reconnect
from pipeline.clock import Clock, system_clock
from pipeline.errors import LeaseLostError
from relayops.logging import get_logger

log = get_logger(__name__)

RETRY_SECONDS = 0.1  # the first retry after a failed beat; doubles up to a third of the lease
# A tick also extends the leases due within this fraction of their interval: leases taken at nearly
# the same moment share one statement from then on, instead of one tick each a moment apart.
EARLY_FRACTION = 0.1
THREAD_NAME = "lease-heartbeat"


class Heartbeat:
    """While entered, the process's beater extends ``lease`` every ``lease_seconds / 3``; ``check()``
    raises once it is lost."""

    def __init__(self, lease: queue.Lease, *, lease_seconds: float, clock: Clock = system_clock) -> None:
        self.lease = lease  # the beater replaces it with each extension
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.interval = lease_seconds / 3
        self._lost = False
        self._beater: _Beater | None = None
        # The beater's schedule (read and written under its lock): when the next beat is due
        # (time.monotonic()), and the wait after the last one (shorter while beats fail).
        self._due = math.inf
        self._wait = self.interval

    def __enter__(self) -> Heartbeat:
        if self._beater is None:  # entered again while registered (a carried job's): its schedule stands
            self._beater = _process_beater()
            self._beater.register(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._beater is not None:
            self._beater.unregister(self)
            self._beater = None

    def check(self) -> None:
        """Raise LeaseLostError once the lease was taken, or ran out without a beat reaching the database."""
        if self._lost:
            raise LeaseLostError(f"job {self.lease.job_id}: lease fence {self.lease.fence} lost")
        if self.clock.now() >= self.lease.lease_until:
            raise LeaseLostError(f"job {self.lease.job_id}: lease fence {self.lease.fence} ran out unextended")


class _Beater:
    """A process's heartbeat thread and the leases it keeps."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._lock = threading.Condition(threading.Lock())
        self._beats: set[Heartbeat] = set()
        self._thread: threading.Thread | None = None
        # When the parked thread wakes by itself: inf while it waits only to be told, -inf while it is
        # awake (it looks at the registry before it parks again, so nobody needs to wake it).
        self._parked_until = -math.inf
        self._connected = False  # it beat since it was last idle: its connection may be open

    def register(self, beat: Heartbeat) -> None:
        with self._lock:
            beat._due = time.monotonic() + beat.interval
            beat._wait = beat.interval
            self._beats.add(beat)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
            elif beat._due < self._parked_until:
                self._lock.notify()

    def unregister(self, beat: Heartbeat) -> None:
        if self.pid != os.getpid():
            return  # entered before a fork: the child never had it registered with a beater of its own
        with self._lock:
            self._beats.discard(beat)
            if not self._beats and self._connected:
                self._lock.notify()  # idle: the thread closes its connection

    def _run(self) -> None:
        try:
            while True:
                due = self._next_due()
                if due:
                    self._beat(due)
                else:  # no lease left: hold no connection while idle
                    reconnect.drop_connection()
        finally:
            reconnect.drop_connection()

    def _next_due(self) -> list[Heartbeat]:
        """Wait until a lease is due and return the leases to extend now; [] when the last lease
        was unregistered after a beat (the connection is to be closed)."""
        with self._lock:
            while True:
                if not self._beats and self._connected:
                    self._connected = False
                    return []
                now = time.monotonic()
                wake_at = min((beat._due for beat in self._beats), default=math.inf)
                if wake_at <= now:
                    self._connected = True
                    return [beat for beat in self._beats if beat._due <= now + beat.interval * EARLY_FRACTION]
                self._parked_until = wake_at
                self._lock.wait(None if wake_at == math.inf else wake_at - now)
                self._parked_until = -math.inf

    def _beat(self, due: list[Heartbeat]) -> None:
        """One statement for every due lease; a lease it did not extend is lost."""
        started = time.monotonic()
        try:
            extended = queue.heartbeat_many(
                [(beat.lease, beat.clock.now() + dt.timedelta(seconds=beat.lease_seconds)) for beat in due])
        except Exception as exc:  # a database blip: a fresh connection, and beat again soon
            reconnect.drop_connection()
            with self._lock:
                for beat in due:
                    beat._wait = min(RETRY_SECONDS if beat._wait == beat.interval else beat._wait * 2, beat.interval)
                    beat._due = time.monotonic() + beat._wait
                failed = [beat for beat in due if beat in self._beats]
            for beat in failed:
                log.warning("lease.heartbeat_failed", job_id=beat.lease.job_id, error_type=type(exc).__name__)
            return
        lost = []
        with self._lock:
            for beat in due:
                lease = extended.get((beat.lease.job_id, beat.lease.fence))
                if lease is not None:
                    beat.lease, beat._wait, beat._due = lease, beat.interval, started + beat.interval
                elif beat in self._beats:  # still running, and another worker holds the job, or it ended
                    beat._lost = True
                    self._beats.discard(beat)
                    lost.append(beat)
        for beat in lost:
            log.warning("lease.lost", job_id=beat.lease.job_id, fence=beat.lease.fence)


_beater: _Beater | None = None
_creating = threading.Lock()


def _process_beater() -> _Beater:
    """This process's beater, made on first use; a forked child makes its own."""
    global _beater
    beater = _beater
    if beater is None or beater.pid != os.getpid():
        with _creating:
            if _beater is None or _beater.pid != os.getpid():
                _beater = _Beater()
            beater = _beater
    return beater


def _after_fork_in_child() -> None:
    global _creating
    _creating = threading.Lock()  # a parent's thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)
