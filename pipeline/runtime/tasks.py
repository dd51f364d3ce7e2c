"""The functions django-q2 runs. They carry no job identity: RelayOps' tables say what to do.

Each drain runs the extractor and publishers the settings choose (pipeline.plugins).

``drain`` is what every kick starts. Before it exits at the end of its budget it enqueues its
successor, so each worker keeps a drain parked on LISTEN and an idle cluster starts a job within
milliseconds. ``sweep`` is the once-a-minute schedule (``pipeline.runtime.cluster.ensure_sweeper_schedule``).
Their dotted paths are stored in django-q2's broker and schedule rows: renaming them is a migration.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings

from pipeline.clock import system_clock
from pipeline.crash import NO_CRASH, CrashInjector
from pipeline.maintenance.sweeper import Sweeper
from pipeline.plugins import configured_extractor, configured_publisher
from pipeline.runtime import liveness, wakeups
from pipeline.runtime.drain import Drain, DrainEnding
from pipeline.runtime.shutdown import STATE
from relayops.logging import get_logger

log = get_logger(__name__)


def crash_injector() -> CrashInjector:
    """The injector ``RELAYOPS_CRASH_POINTS`` asks for: SIGKILL at the named points (settings refuse
    it with DEBUG off unless forced)."""
    spec = settings.RELAYOPS["CRASH_POINTS"]
    return CrashInjector.parse(spec, kill=True) if spec else NO_CRASH


def drain(max_seconds: float | None = None) -> dict[str, Any]:
    """Run jobs and publish the outbox (the task every kick enqueues)."""
    return _run(max_seconds, jobs=True, outbox=True)


def drain_jobs(max_seconds: float | None = None) -> dict[str, Any]:
    """Run jobs only (for a dedicated cluster; relaying is then left to ``drain_outbox``)."""
    return _run(max_seconds, jobs=True, outbox=False)


def drain_outbox(max_seconds: float | None = None) -> dict[str, Any]:
    """Publish the outbox only."""
    return _run(max_seconds, jobs=False, outbox=True)


def _run(max_seconds: float | None, *, jobs: bool, outbox: bool) -> dict[str, Any]:
    options = settings.RELAYOPS
    task = f"{__name__}." + ("drain" if jobs and outbox else "drain_jobs" if jobs else "drain_outbox")
    try:
        report = Drain(
            liveness.worker_id(), max_seconds=max_seconds or options["DRAIN_SECONDS"], jobs=jobs, outbox=outbox,
            poll_seconds=options["DRAIN_POLL_SECONDS"], claim_seconds=options["OUTBOX_CLAIM_SECONDS"],
            extractor=configured_extractor(), publisher=configured_publisher(), crash=crash_injector(),
        ).run()
    except Exception as exc:  # the database is unreachable, most likely: wait, then hand over anyway
        log.error("drain.failed", error_type=type(exc).__name__)
        STATE.requested.wait(min(5.0, options["DRAIN_SECONDS"]))
        _successor(task)
        raise
    if report.ended == DrainEnding.BUDGET:
        _successor(task)
    return asdict(report)


def _successor(task: str) -> None:
    """Hand this worker's place to the next drain, unless the cluster is stopping."""
    if not STATE.requested.is_set():
        wakeups.kick_drain(task)


def sweep() -> dict[str, Any]:
    """The once-a-minute maintenance pass (see pipeline.maintenance.sweeper)."""
    return asdict(Sweeper.from_settings().run_once(system_clock.now()))
