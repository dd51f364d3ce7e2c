"""A worker process's life: drains back to back until the node stops, never django-q2's task queue.

django-q2's workers share one multiprocessing queue, and a worker SIGKILLed while blocked in its
``get()`` holds the queue's lock for good: every other worker then blocks on it and the node takes no
job again. So a RelayOps worker never reads that queue. ``post_spawn`` (pipeline.runtime.cluster)
calls ``run_worker``, which keeps a drain parked for the process's whole life, handing over to a
fresh drain every ``DRAIN_SECONDS``. Between two drains the worker:

- backs off briefly after a failed drain (the database is away): at most ``MAX_BACKOFF_SECONDS``, so
  a node takes jobs again within about a second of the database coming back; then, first thing,
  gives back uncounted (``database_error``) any lease the failed drain left behind, rather than let
  it expire and count against the job's budget of lease expiries;
- sweeps if the fleet's once-a-minute turn is free (pipeline.maintenance.sweeper.run_if_due);
- exits to be recycled by the sentinel when its memory grew past ``WORKER_MAX_RSS_MB``, and exits when
  its sentinel is gone (it would otherwise drain unsupervised forever);
- re-arms django-q2's per-task timer, so the sentinel still ends a worker stuck past its ``timeout``.

Whatever ends the loop, the process then exits (``exit_worker``): returning would leave it blocked on
the task queue.
"""

from __future__ import annotations

import enum
import os
import resource
from multiprocessing import current_process
from typing import Any, Callable

from django.conf import settings
from django.utils import timezone

from pipeline import queue
from pipeline.maintenance.sweeper import run_if_due
from pipeline.reasons import ErrorCode
from pipeline.reconnect import drop_connection
from pipeline.runtime import liveness, tasks
from pipeline.runtime.shutdown import STATE, StopState
from relayops.logging import get_logger

log = get_logger(__name__)

FIRST_BACKOFF_SECONDS = 0.1
MAX_BACKOFF_SECONDS = 1.0
RECYCLED = -2  # django-q2's timer value for "recycled": the sentinel logs a recycle, not a death


class WorkerEnd(enum.StrEnum):
    STOPPED = "stopped"  # the node stops (SIGUSR1/SIGUSR2)
    RECYCLED = "recycled"  # memory grew past the limit: the sentinel spawns a fresh worker
    ORPHANED = "orphaned"  # the sentinel died: no one would supervise this worker


def run_worker(
    *, drain: Callable[[], Any] = tasks.drain, sweep: Callable[[], Any] | None = None,
    stop: StopState = STATE, timer: Any = None,
) -> WorkerEnd:
    """Drains back to back until a stop, a recycle or an orphaning; returns which."""
    parent = os.getppid()
    sweep = sweep or (lambda: run_if_due(timezone.now()))
    failures = 0
    while not stop.requested.is_set():
        if os.getppid() != parent:
            log.error("worker.orphaned", pid=os.getpid())
            return WorkerEnd.ORPHANED
        _arm(timer)
        try:
            if failures:
                release_after_fault()
            drain()
            failures = 0
        except Exception as exc:
            failures += 1
            log.error("drain.failed", error_type=type(exc).__name__, failures=failures)
            drop_connection()
            stop.requested.wait(min(FIRST_BACKOFF_SECONDS * 2 ** (failures - 1), MAX_BACKOFF_SECONDS))
            continue
        _sweep(sweep)
        if _rss_mb() > settings.RELAYOPS["WORKER_MAX_RSS_MB"]:
            log.info("worker.recycle", pid=os.getpid(), rss_mb=round(_rss_mb()))
            if timer is not None:
                timer.value = RECYCLED
            return WorkerEnd.RECYCLED
    return WorkerEnd.STOPPED


def release_after_fault() -> int:
    """Give back, without counting an attempt, the leases this worker still holds: a drain that failed
    on the database left them (no job of this process runs between two drains). Returns how many."""
    released = len(queue.release_held(liveness.worker_id(), code=ErrorCode.DATABASE_ERROR))
    if released:
        log.warning("worker.leases_released_after_fault", jobs=released)
    return released


def _sweep(sweep: Callable[[], Any]) -> None:
    try:
        sweep()
    except Exception as exc:  # maintenance only: the next turn comes within a minute
        log.error("sweep.failed", error_type=type(exc).__name__)
        drop_connection()


def _arm(timer: Any) -> None:
    """Give django-q2's sentinel a deadline for this drain: it ends the worker past ``timeout``."""
    if timer is not None and settings.Q_CLUSTER.get("timeout"):
        timer.value = float(settings.Q_CLUSTER["timeout"])


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def django_q_timer() -> Any:
    """This worker's django-q2 timer (the third argument django-q2 spawned the worker with), or None."""
    args: tuple[Any, ...] = tuple(getattr(current_process(), "_args", ()))
    return args[2] if len(args) > 2 and hasattr(args[2], "value") else None


def exit_worker(end: WorkerEnd) -> None:
    """End the worker process at once (it must never reach django-q2's task queue)."""
    log.info("worker.exit", pid=os.getpid(), end=end.value)
    drop_connection()
    os._exit(0)
