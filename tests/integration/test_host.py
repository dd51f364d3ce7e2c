"""A worker's life (pipeline.runtime.host): failed drains are retried within a second, django-q2's
timer is armed before each drain, and a worker past its memory limit is recycled."""

from __future__ import annotations

import time
from multiprocessing import Value

import pytest

from pipeline.runtime.host import MAX_BACKOFF_SECONDS, RECYCLED, WorkerEnd, run_worker
from pipeline.runtime.shutdown import StopState

pytestmark = pytest.mark.django_db(transaction=True)  # a failed drain is followed by a look for its leases


def test_failed_drains_are_retried_with_a_backoff_capped_at_a_second(settings):
    stop, calls = StopState(), []

    def drain() -> None:
        calls.append(time.monotonic())
        if len(calls) < 6:
            raise ConnectionError("the database is away")
        stop.requested.set()

    assert run_worker(drain=drain, sweep=lambda: None, stop=stop) == WorkerEnd.STOPPED
    gaps = [later - earlier for earlier, later in zip(calls, calls[1:])]
    assert len(calls) == 6 and gaps[0] < gaps[2]  # it backs off ...
    assert max(gaps) < MAX_BACKOFF_SECONDS + 0.5  # ... but never longer than about a second


def test_the_sentinels_timer_is_armed_before_each_drain_and_a_big_worker_is_recycled(settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "WORKER_MAX_RSS_MB": 1.0}
    timer, seen, swept = Value("f", -1.0), [], []
    end = run_worker(drain=lambda: seen.append(timer.value), sweep=lambda: swept.append(1), stop=StopState(),
                     timer=timer)
    assert seen == [float(settings.Q_CLUSTER["timeout"])]
    assert (end, timer.value, swept) == (WorkerEnd.RECYCLED, RECYCLED, [1])


def test_a_stopped_worker_runs_no_drain():
    stop = StopState()
    stop.requested.set()
    assert run_worker(drain=lambda: (_ for _ in ()).throw(AssertionError("ran")), stop=stop) == WorkerEnd.STOPPED
