"""Drain presence and node health: drains record when they last looked for work and when they last did
some, and say when they are gone because their worker stops; ``relayops_health`` and
``relayops_status`` read it."""

from __future__ import annotations

import datetime as dt
import os
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Min

from pipeline.models import CLAIMABLE_FROM, DrainPresence, Job
from pipeline.states import JobStatus
from relayops.logging import get_logger

log = get_logger(__name__)

PRESENCE_RETENTION = dt.timedelta(days=1)


def node_name() -> str:
    return settings.RELAYOPS["NODE_NAME"]


def worker_id() -> str:
    """This process's identity as a lease owner: ``node:pid`` (tests find a job's process by it)."""
    return f"{node_name()}:{os.getpid()}"


def record_presence(worker: str, now: dt.datetime, *, progress: bool) -> None:
    """Record that ``worker`` looked for work at ``now`` (and did some, if ``progress``)."""
    fields = {"seen_at": now, "gone_at": None, **({"progress_at": now} if progress else {})}
    if DrainPresence.objects.filter(worker=worker).update(**fields):
        return
    try:
        with transaction.atomic():
            DrainPresence.objects.create(
                worker=worker, node=worker.rsplit(":", 1)[0], started_at=now, seen_at=now,
                progress_at=now if progress else None,
            )
    except IntegrityError:  # created concurrently by the same name: a recycled pid; just update
        DrainPresence.objects.filter(worker=worker).update(**fields)


_PRESENCE_WRITE = ("UPDATE {table} SET seen_at = %(now)s, progress_at = %(now)s, gone_at = NULL "
                   "WHERE worker = {worker} RETURNING 1")


def presence_write(worker: str) -> str | None:
    """``record_presence(worker, now, progress=True)`` for an existing row as literal SQL another statement
    of the drain's runs with its own (a commit's: its ``%(now)s`` is the time), so a busy drain's presence
    costs no round trip of its own; RETURNING a row when it was recorded. PostgreSQL only (None else)."""
    if connection.vendor != "postgresql":
        return None
    postgresql_ops: Any = connection.ops  # PostgreSQL's operations compose SQL with its literals
    literal = postgresql_ops.compose_sql("%s", [worker]).replace("%", "%%")
    return _PRESENCE_WRITE.format(table=DrainPresence._meta.db_table, worker=literal)


def mark_gone(worker: str, now: dt.datetime, *, wait: bool = True) -> None:
    """Say that ``worker`` stops (its drain ended for it, or it had none running): status and health
    see it at once.

    Runs on a fresh connection, like a lease release: the drain's own may have been interrupted
    mid-statement. ``wait=False`` (from a signal handler) does not wait for it. A database that is
    gone too is only logged; the presence then just ages out.
    """
    def run() -> None:
        try:
            DrainPresence.objects.filter(worker=worker).update(gone_at=now)
        except Exception as exc:
            log.warning("drain.gone_not_recorded", worker=worker, error_type=type(exc).__name__)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="drain-gone", daemon=not wait)
    thread.start()
    if wait:
        thread.join()


def prune(now: dt.datetime) -> int:
    """Forget processes not seen for a day (pids of recycled or stopped workers)."""
    deleted, _ = DrainPresence.objects.filter(seen_at__lt=now - PRESENCE_RETENTION).delete()
    return deleted


def oldest_due(now: dt.datetime) -> dt.datetime | None:
    """When the longest-waiting claimable job became claimable (None: nothing is due)."""
    return Job.objects.claimable(now).aggregate(at=Min(CLAIMABLE_FROM))["at"]


@dataclass(frozen=True)
class Health:
    healthy: bool
    reason: str


def assess(now: dt.datetime, *, node: str | None, stale_seconds: float) -> Health:
    """Unhealthy when ``node`` (None: any node) holds no live lease and either no drain of it was seen
    for ``stale_seconds``, or jobs have been due that long and none of its drains made progress
    meanwhile (a wedged node). Idle drains record their presence every couple of seconds, so a short
    window tells a wedge from idleness; a worker running a long job is busy, not stuck: its heartbeat
    keeps its lease live."""
    stale = now - dt.timedelta(seconds=stale_seconds)
    drains = DrainPresence.objects.all() if node is None else DrainPresence.objects.filter(node=node)
    last = drains.filter(gone_at__isnull=True).aggregate(seen=Max("seen_at"), progress=Max("progress_at"))
    busy = Job.objects.filter(status=JobStatus.LEASED, lease_until__gt=now)
    if node is not None:
        busy = busy.filter(lease_owner__startswith=f"{node}:")
    where = f"node {node}" if node else "any node"
    if busy.exists():
        return Health(True, f"drains on {where} are running jobs")
    if not (last["seen"] and last["seen"] >= stale):
        gone = drains.aggregate(at=Max("gone_at"))["at"]
        if gone is not None:
            return Health(False, f"{where} stopped {(now - gone).total_seconds():.0f} s ago (its drains said so)")
        return Health(False, f"no drain on {where} looked for work in the last {stale_seconds:.0f} s")
    due_since = oldest_due(now)
    if due_since is not None and due_since < stale and not (last["progress"] and last["progress"] >= stale):
        waited = (now - due_since).total_seconds()
        return Health(False, f"jobs due for {waited:.0f} s and no drain on {where} made progress "
                             f"in the last {stale_seconds:.0f} s")
    return Health(True, f"drains on {where} are alive and keeping up")
