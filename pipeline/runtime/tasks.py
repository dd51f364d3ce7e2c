"""The units a worker runs. They carry no job identity: RelayOps' tables say what to do.

``drain`` is what every worker process runs back to back for its whole life (pipeline.runtime.host),
so each worker keeps a drain parked on LISTEN and an idle cluster starts a job within milliseconds.
``drain_jobs`` and ``drain_outbox`` run one side only; ``sweep`` is one maintenance pass, which the
host runs once a minute fleet-wide (pipeline.maintenance.sweeper.run_if_due). Each drain runs the
extractor and publishers the settings choose (pipeline.plugins).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings

from pipeline.clock import system_clock
from pipeline.crash import NO_CRASH, CrashInjector
from pipeline.maintenance.sweeper import Sweeper
from pipeline.plugins import configured_extractor, configured_publisher
from pipeline.runtime import liveness
from pipeline.runtime.drain import Drain


def crash_injector() -> CrashInjector:
    """The injector ``RELAYOPS_CRASH_POINTS`` asks for: SIGKILL at the named points (settings refuse
    it with DEBUG off unless forced)."""
    spec = settings.RELAYOPS["CRASH_POINTS"]
    return CrashInjector.parse(spec, kill=True) if spec else NO_CRASH


def drain(max_seconds: float | None = None) -> dict[str, Any]:
    """Run jobs and publish the outbox (what every worker runs)."""
    return _run(max_seconds, jobs=True, outbox=True)


def drain_jobs(max_seconds: float | None = None) -> dict[str, Any]:
    """Run jobs only (for a dedicated cluster; relaying is then left to ``drain_outbox``)."""
    return _run(max_seconds, jobs=True, outbox=False)


def drain_outbox(max_seconds: float | None = None) -> dict[str, Any]:
    """Publish the outbox only."""
    return _run(max_seconds, jobs=False, outbox=True)


def _run(max_seconds: float | None, *, jobs: bool, outbox: bool) -> dict[str, Any]:
    """One drain; an exception (the database is away, most likely) is the host's to retry."""
    options = settings.RELAYOPS
    report = Drain(
        liveness.worker_id(), max_seconds=max_seconds or options["DRAIN_SECONDS"], jobs=jobs, outbox=outbox,
        poll_seconds=options["DRAIN_POLL_SECONDS"], claim_seconds=options["OUTBOX_CLAIM_SECONDS"],
        batch_size=options["OUTBOX_BATCH_SIZE"], batch_window_seconds=options["OUTBOX_BATCH_WINDOW_SECONDS"],
        extractor=configured_extractor(), publisher=configured_publisher(), crash=crash_injector(),
    ).run()
    return asdict(report)


def sweep() -> dict[str, Any]:
    """The once-a-minute maintenance pass (see pipeline.maintenance.sweeper)."""
    return asdict(Sweeper.from_settings().run_once(system_clock.now()))
