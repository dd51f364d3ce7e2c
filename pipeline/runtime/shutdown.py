"""Graceful stop inside a django-q2 worker: stop taking jobs, finish within a grace period, then release.

django-q2 tells running tasks nothing when the cluster stops, so ``pipeline.runtime.cluster`` makes the
sentinel signal its workers first. In a worker:

- SIGUSR1 (stop): drains take no new job and exit; a running job may finish for
  ``SHUTDOWN_GRACE_SECONDS``, after which the worker hurries itself.
- SIGUSR2 (hurry; also a second SIGTERM to qcluster): ``ShutdownInterrupt`` is raised in the running
  drain, which releases its leases (``queue.release``: back to queued, no attempt counted).

SIGTERM keeps its default in workers: the sentinel relies on it to end a worker past its timeout.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from django.db import connection

from pipeline import queue
from pipeline.errors import ShutdownInterrupt
from pipeline.reasons import ErrorCode
from relayops.logging import get_logger

log = get_logger(__name__)

STOP_SIGNAL = signal.SIGUSR1
HURRY_SIGNAL = signal.SIGUSR2
FORCE_EXIT_SECONDS = 5.0  # after a hurry, a worker still alive this long releases its leases and exits
FORCE_RELEASE_SECONDS = 3.0  # what the forced exit's last words and release may take before it exits anyway


class _SignalSafeEvent(threading.Event):
    """An Event a signal handler may set while the thread it interrupted is inside this Event's own
    set() or wait(): the handler runs in that thread, and threading.Event's lock is not reentrant (the
    second stop signal, landing inside the first one's handler on a loaded machine, hung the worker)."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition(threading.RLock())


class StopState:
    """This process's view of a stop. Signal handlers write it; drains read it."""

    def __init__(self) -> None:
        self.requested = _SignalSafeEvent()
        self.hurried = _SignalSafeEvent()
        self.in_drain = False  # a drain runs in this process's main thread: hurry may interrupt it
        self.worker_process = False  # a qcluster worker (handlers installed): may be force-exited
        self._interrupted = False
        self._timer: threading.Timer | None = None
        self._force: threading.Timer | None = None

    def request_stop(self, grace_seconds: float) -> None:
        if self.requested.is_set():
            return
        self.requested.set()
        self._timer = threading.Timer(grace_seconds, os.kill, (os.getpid(), HURRY_SIGNAL))
        self._timer.daemon = True
        self._timer.start()

    def hurry(self) -> None:
        """Called in the main thread (a signal handler): interrupt the running drain, once."""
        self.requested.set()
        self.hurried.set()
        if self.worker_process and self._force is None:
            # Belt and braces: the interrupt lands wherever the job happens to be; if the worker
            # has not exited shortly after it, stop it from a thread that cannot be interrupted.
            self._force = threading.Timer(FORCE_EXIT_SECONDS, _force_exit)
            self._force.daemon = True
            self._force.start()
        if self.in_drain and not self._interrupted:
            self._interrupted = True
            raise ShutdownInterrupt()

    def reset(self) -> None:
        """Forget a stop (tests only: a worker process never un-stops)."""
        for timer in (self._timer, self._force):
            if timer is not None:
                timer.cancel()
        self._force = None
        self.requested.clear()
        self.hurried.clear()
        self.in_drain = False
        self._interrupted = False
        self._timer = None


STATE = StopState()


def _on_stop(signum: int, frame: FrameType | None) -> None:
    from django.conf import settings

    from pipeline.clock import system_clock
    from pipeline.runtime import liveness

    log.info("worker.stop_requested", pid=os.getpid(), grace_seconds=settings.RELAYOPS["SHUTDOWN_GRACE_SECONDS"])
    STATE.request_stop(settings.RELAYOPS["SHUTDOWN_GRACE_SECONDS"])
    if not STATE.in_drain:  # between two drains: none will end to say this worker is gone
        liveness.mark_gone(liveness.worker_id(), system_clock.now(), wait=False)


def _on_hurry(signum: int, frame: FrameType | None) -> None:
    STATE.hurry()


def _force_exit() -> None:
    """The worker did not finish after a hurry: release what it still leases, then exit at once.

    The interrupt lands wherever the main thread was, and an exception raised from a signal handler
    between a lock's acquire and its ``try`` leaves the lock held (logging's handler lock, say), so the
    last words and the release run in a thread of their own for at most FORCE_RELEASE_SECONDS; then the
    worker exits whatever they met, and a lease they did not release expires instead."""
    from pipeline.runtime.liveness import worker_id

    def last_words() -> None:
        log.error("worker.forced_exit", pid=os.getpid(), after_seconds=FORCE_EXIT_SECONDS)
        release_held(worker_id())

    words = threading.Thread(target=last_words, name="forced-exit", daemon=True)
    words.start()
    words.join(FORCE_RELEASE_SECONDS)
    os._exit(1)


def install_worker_handlers() -> None:
    STATE.worker_process = True
    signal.signal(STOP_SIGNAL, _on_stop)
    signal.signal(HURRY_SIGNAL, _on_hurry)


def release_held(worker_id: str) -> int:
    """Release every job ``worker_id`` still leases, without counting the attempt; returns how many.

    Runs in a fresh thread, hence on a fresh connection: the interrupted one may be mid-transaction.
    Each release is the guarded ``queue.release``; a lease lost meanwhile is simply skipped.
    """
    released: list[int] = []

    def run() -> None:
        try:
            released.extend(queue.release_held(worker_id, code=ErrorCode.SHUTDOWN))
        except Exception as exc:  # the database is gone too: the leases will expire instead
            log.error("worker.release_failed", worker=worker_id, error_type=type(exc).__name__)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="release-held")
    thread.start()
    thread.join()
    if released:
        log.warning("worker.leases_released", worker=worker_id, jobs=released)
    return len(released)

