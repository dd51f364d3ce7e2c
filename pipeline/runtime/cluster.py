"""Glue between django-q2's process tree and RelayOps (installed by PipelineConfig.ready()).

django-q2 hosts the processes: the sentinel spawns, supervises and respawns the workers, the pusher
and the monitor, and turns signals into a stop. RelayOps uses nothing else of it. Its workers share
one multiprocessing task queue, and a worker SIGKILLed while blocked reading it leaves the queue's
lock held for good, wedging every other worker of the node. So:

- every worker, when spawned (``post_spawn``), installs the stop handlers of pipeline.runtime.shutdown
  and runs drains back to back for its whole life (pipeline.runtime.host), never reading the task
  queue; when that loop ends, the worker exits;
- ``Sentinel.stop`` is wrapped to send SIGUSR1 (stop) to its live workers *before* the original stop
  runs, and to end the pusher and the monitor (they carry no RelayOps work) and drop the STOP pills
  no worker reads: parked drains return at once, running jobs get the grace period, and the original
  stop only waits for the workers to exit;
- ``Cluster.sig_handler`` is wrapped so a second SIGTERM/SIGINT to the main process makes the sentinel
  forward SIGUSR2 (hurry) to the workers: running jobs are interrupted and their leases released;
- ``Sentinel.start`` is wrapped to log loudly if crashes are injected, remove the sweeper schedule of
  earlier versions (the workers sweep now), and make the sentinel survive a SIGTERM sent to the whole
  process group.

The wrappers call the originals unchanged; nothing in django-q2's own files is edited. They lean on
django-q2 internals (the methods above, the sentinel's ``pool``, ``pusher``, ``monitor`` and
``task_queue``, and the worker's timer argument), so ``install`` checks that they exist and refuses to
start, naming the installed version, if not.
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
import time
from types import FrameType
from typing import Any, Callable

import django_q
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django_q import cluster, worker
from django_q.models import Schedule
from django_q.signals import post_spawn

from pipeline.runtime.host import django_q_timer, exit_worker, run_worker
from pipeline.runtime.shutdown import HURRY_SIGNAL, STOP_SIGNAL, install_worker_handlers
from relayops.logging import get_logger

log = get_logger(__name__)

LEGACY_SWEEPER_SCHEDULE = "relayops-sweeper"  # earlier versions swept from a django-q2 Schedule
# What the wrappers need of django-q2 (checked at start-up): methods, and attributes its __init__ sets.
WRAPPED_METHODS = {cluster.Cluster: ("__init__", "sig_handler"), cluster.Sentinel: ("start", "stop")}
USED_ATTRIBUTES = {cluster.Cluster: ("sentinel",),
                   cluster.Sentinel: ("pool", "pusher", "monitor", "task_queue")}
WORKER_ARGUMENTS = ("task_queue", "result_queue", "timer")  # the timer is the third (host.django_q_timer)

_sentinel: Any = None
_sentinel_pid: int | None = None
_group_terminated = False  # the sentinel itself got a SIGTERM: it went to the whole process group


def install() -> None:
    check_django_q()
    post_spawn.connect(on_worker_spawn, dispatch_uid="relayops-worker-spawn")
    _wrap(cluster.Cluster, "__init__", _cluster_init)
    _wrap(cluster.Cluster, "sig_handler", _cluster_signal)
    _wrap(cluster.Sentinel, "start", _sentinel_start)
    _wrap(cluster.Sentinel, "stop", _sentinel_stop)


def check_django_q() -> None:
    """Refuse to start, naming the version, if django-q2 lacks what the wrappers rely on."""
    missing = [f"{cls.__name__}.{name}" for cls, names in WRAPPED_METHODS.items() for name in names
               if not callable(getattr(cls, name, None))]
    for cls, names in USED_ATTRIBUTES.items():
        source = inspect.getsource(cls.__init__)
        missing += [f"{cls.__name__}().{name}" for name in names if f"self.{name} =" not in source]
    if tuple(inspect.signature(worker.worker).parameters)[:3] != WORKER_ARGUMENTS:
        missing.append(f"worker({', '.join(WORKER_ARGUMENTS)}, ...)")
    if missing:
        version = ".".join(map(str, django_q.VERSION))
        raise ImproperlyConfigured(
            f"RelayOps wraps django-q2 internals that django-q2 {version} does not have ({', '.join(missing)}). "
            "It is tested with the version pinned in requirements.txt; install that one."
        )


def _wrap(cls: type, name: str, wrapper: Callable[..., Any]) -> None:
    original = getattr(cls, name)
    if getattr(original, "__relayops__", False):
        return  # ready() ran twice (tests): wrap once

    @functools.wraps(original)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        return wrapper(original, self, *args, **kwargs)

    wrapped.__relayops__ = True  # type: ignore[attr-defined]
    setattr(cls, name, wrapped)


def _cluster_init(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> None:
    original(self, *args, **kwargs)
    # The sentinel, pusher, monitor and workers inherit these until they install their own: a stray
    # stop or hurry signal must never kill a process that has no handler yet.
    signal.signal(STOP_SIGNAL, signal.SIG_IGN)
    signal.signal(HURRY_SIGNAL, signal.SIG_IGN)


def _cluster_signal(original: Callable[..., Any], self: Any, signum: int, frame: FrameType | None) -> None:
    if getattr(self, "_relayops_stopping", False):
        log.warning("cluster.stop_now", signal=signal.Signals(signum).name)
        if self.sentinel is not None and self.sentinel.is_alive():
            os.kill(self.sentinel.pid, HURRY_SIGNAL)
        return
    self._relayops_stopping = True
    log.info("cluster.stopping", signal=signal.Signals(signum).name)
    original(self, signum, frame)


def _sentinel_start(original: Callable[..., Any], self: Any) -> None:
    global _sentinel, _sentinel_pid
    _sentinel, _sentinel_pid = self, os.getpid()
    signal.signal(HURRY_SIGNAL, _forward_hurry)
    # A SIGTERM to the whole process group (systemd's default KillMode, `timeout`, `kill -- -PGID`)
    # would kill the sentinel outright and hang the main process (django-q2 #346). The sentinel, its
    # pusher and its monitor note it and stop the orderly way, on the main process's stop event;
    # workers restore the default (the sentinel ends a timed-out worker with SIGTERM).
    signal.signal(signal.SIGTERM, _note_group_term)
    _announce_crash_injection()
    try:
        remove_legacy_schedule()
    except Exception as exc:  # harmless: with the scheduler off it never fires
        log.warning("cluster.legacy_schedule_not_removed", error_type=type(exc).__name__)
    original(self)


def _forward_hurry(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _sentinel_pid:
        return  # inherited by a child that has not installed its own handler yet
    for process in list(_sentinel.pool):
        if process.is_alive():
            os.kill(process.pid, signum)


def _note_group_term(signum: int, frame: FrameType | None) -> None:
    global _group_terminated
    _group_terminated = True


def _sentinel_stop(original: Callable[..., Any], self: Any) -> None:
    for process in list(self.pool):
        if process.is_alive():
            os.kill(process.pid, STOP_SIGNAL)
    if os.getpid() == _sentinel_pid:
        _end_auxiliaries(self)
        if _group_terminated:
            _expect_dead_workers(self)
    original(self)


def _end_auxiliaries(sentinel: Any) -> None:
    """The pusher and the monitor carry no RelayOps work, and either may be blocked on a queue lock a
    killed process left held: end them rather than wait for them. No worker reads the task queue, so
    the STOP pills the original stop queues for them are dropped (each worker exits on its own)."""
    for process in (sentinel.pusher, sentinel.monitor):
        if process is not None and process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
    sentinel.task_queue.put = lambda *args, **kwargs: None


def _expect_dead_workers(sentinel: Any, timeout: float = 2.0) -> None:
    """The workers got the group's SIGTERM too and died (their leases will expire): say so."""
    deadline = time.monotonic() + timeout
    while any(p.is_alive() for p in sentinel.pool) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not any(p.is_alive() for p in sentinel.pool):
        log.warning("cluster.workers_killed_by_group_signal", workers=len(sentinel.pool))


def on_worker_spawn(sender: Any, proc_name: str = "", **kwargs: Any) -> None:
    """In each new worker: stop handlers, then drains for the process's life; then the process exits."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    install_worker_handlers()
    exit_worker(run_worker(timer=django_q_timer()))


def _announce_crash_injection() -> None:
    spec = settings.RELAYOPS["CRASH_POINTS"]
    if spec:
        log.critical(
            "CRASH INJECTION ENABLED: workers and the relay will SIGKILL themselves",
            crash_points=spec, debug=settings.DEBUG, forced=settings.RELAYOPS["CRASH_POINTS_FORCE"],
        )


def remove_legacy_schedule() -> None:
    """Delete the sweeper schedule earlier versions created: the workers sweep themselves now."""
    Schedule.objects.filter(name=LEGACY_SWEEPER_SCHEDULE).delete()
