"""Wake-ups that carry no job identity: losing, repeating or replaying one is harmless.

``ring`` runs inside the caller's transaction, so a wake-up exists exactly when the row that caused
it committed: a PostgreSQL NOTIFY (delivered at commit) for drains that are listening, and, when the
cluster is enabled, a django-q2 "kick": a task with no arguments that starts a drain if none runs.
Kicks are coalesced: while enough drain tasks already wait unstarted in the broker, another would
only start a drain that finds nothing, so none is added. ``Listener`` is the other end: a drain's
own autocommit connection waiting on the NOTIFYs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

from relayops.errors import InvalidInputError

JOBS = "relayops_jobs"
OUTBOX = "relayops_outbox"
CHANNELS = (JOBS, OUTBOX)

DRAIN_TASK = "pipeline.runtime.tasks.drain"
KICK_OPTIONS = {"ack_failure": True, "save": False, "task_name": "relayops-drain"}

_full_until = 0.0  # monotonic time until which this process takes the broker queue as full without asking
_relaying_here = False  # a drain of this process publishes the outbox right after its own commits


def _check_channel(channel: str) -> None:
    if channel not in CHANNELS:
        raise InvalidInputError("channel", f"unknown wake-up channel {channel!r}")


@contextmanager
def relaying_here() -> Iterator[None]:
    """While a drain that publishes the outbox runs in this process, commits need no outbox kick."""
    global _relaying_here
    previous, _relaying_here = _relaying_here, True
    try:
        yield
    finally:
        _relaying_here = previous


def ring(channel: str) -> None:
    """NOTIFY ``channel`` and add a kick, both in the caller's transaction."""
    _check_channel(channel)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [channel])
    if channel == JOBS or not _relaying_here:
        kick_drain()


def kick_drain(task: str = DRAIN_TASK) -> bool:
    """Add one ``task`` (a drain) unless kicks are off, django-q2 runs tasks inline, or enough wait.

    True if one was added. A skipped or lost kick costs latency at most: parked drains hear the
    NOTIFY, and the sweeper re-kicks every minute.
    """
    if not settings.RELAYOPS["KICKS"]:
        return False
    from django_q.conf import Conf

    if Conf.SYNC:  # a synchronous "kick" would run a whole drain inside the caller
        return False
    global _full_until
    if time.monotonic() < _full_until:  # a burst: one count per KICK_CACHE_SECONDS, not one per enqueue
        return False
    if waiting_drains(limit=settings.RELAYOPS["KICK_COALESCE"]) >= settings.RELAYOPS["KICK_COALESCE"]:
        _full_until = time.monotonic() + settings.RELAYOPS["KICK_CACHE_SECONDS"]
        return False
    from django_q.tasks import async_task

    async_task(task, q_options=dict(KICK_OPTIONS))
    return True


def waiting_drains(*, limit: int) -> int:
    """How many tasks wait unstarted in this cluster's queue (counted up to ``limit``).

    Every task on the queue is a drain kick or the sweeper, and both make progress, so they are not
    told apart (that would mean unpickling payloads). Tasks a pusher took carry a future lock.
    """
    from django.utils import timezone
    from django_q.conf import Conf
    from django_q.models import OrmQ

    return OrmQ.objects.using(Conf.ORM).filter(key=Conf.CLUSTER_NAME, lock__lte=timezone.now())[:limit].count()


class Listener:
    """LISTENs on ``channels`` on a dedicated autocommit connection (never Django's, never pooled).

    Open it *before* looking for work: a NOTIFY committed after the LISTEN is never missed, and one
    committed before it left a row that the first look finds.
    """

    def __init__(self, channels: Iterable[str]) -> None:
        import psycopg

        self.channels = tuple(channels)
        for channel in self.channels:
            _check_channel(channel)
        self._conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
        for channel in self.channels:
            self._conn.execute(f'LISTEN "{channel}"')  # names are our constants, checked above

    @classmethod
    def open(cls, channels: Iterable[str]) -> Listener | None:
        """A listener on PostgreSQL; None elsewhere (SQLite has no NOTIFY: callers poll)."""
        if connection.vendor != "postgresql":
            return None
        return cls(channels)

    def wait(self, timeout: float) -> set[str]:
        """Block up to ``timeout`` seconds for a wake-up; return the channels rung (empty on timeout).

        Wake-ups already queued on the connection are all consumed, so a burst of NOTIFYs costs one
        wake-up, not one per row.
        """
        rung = {n.channel for n in self._conn.notifies(timeout=max(timeout, 0.0), stop_after=1)}
        if rung:
            rung |= {n.channel for n in self._conn.notifies(timeout=0.0)}
        return rung

    def close(self) -> None:
        self._conn.close()
