"""django-q2 kick tasks: the durable half of the doorbell.

A kick is a django-q2 task with no arguments that runs one drain (``pipeline.tasks.drain``). Added
in the caller's transaction, it exists exactly when the row that needed it committed. Kicks are
coalesced: while enough drain tasks already wait unstarted in the broker, another one would only
start a drain that finds nothing, so none is added. A skipped or lost kick costs latency at most:
parked drains hear the NOTIFY, and the sweeper re-kicks every minute.
"""

from __future__ import annotations

import time

from django.conf import settings

from pipeline import doorbell

DRAIN_TASK = "pipeline.tasks.drain"
KICK_OPTIONS = {"ack_failure": True, "save": False, "task_name": "relayops-drain"}

_full_until = 0.0  # monotonic time until which this process takes the queue as full without asking


def kick(channel: str) -> bool:
    """Add a drain task for ``channel``'s rows in the caller's transaction; True if one was added.

    An outbox kick from inside a drain is skipped: that drain publishes right after its commit.
    """
    if channel not in doorbell.CHANNELS:
        raise ValueError(f"unknown doorbell channel {channel!r}")
    if channel == doorbell.OUTBOX:
        from pipeline.shutdown import STATE

        if STATE.in_drain:
            return False
    return kick_drain()


def kick_drain(task: str = DRAIN_TASK) -> bool:
    """Add one ``task`` (a drain) unless kicks are off, django-q2 runs tasks inline, or enough wait."""
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
