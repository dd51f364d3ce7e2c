"""Infrastructure faults are never the job's: killed connections, a commit whose outcome the client
cannot know, a heartbeat that loses its connection, crashed workers, and rescued jobs' place in line.

Real processes and real connections: backends are killed with ``pg_terminate_backend``, a commit is
cut after it landed by a TCP proxy in front of PostgreSQL (``tests/proxy.py``), workers SIGKILL
themselves through their crash injector.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
from typing import Any

import pytest
from django.db import OperationalError

from pipeline import queue
from pipeline.clock import FrozenClock
from pipeline.errors import LeaseLostError
from pipeline.extraction.rules import invoice_extractor
from pipeline.maintenance.rescuer import LeaseRescuer
from pipeline.models import Attempt, DeadLetter, Job
from pipeline.relay import publish_pending
from pipeline.runtime import liveness
from pipeline.runtime.heartbeat import Heartbeat
from pipeline.runtime.host import WorkerEnd, run_worker
from pipeline.runtime.shutdown import StopState
from pipeline.worker import process_once
from tests.conftest import invoice
from tests.integration.conftest import one_of_each
from tests.integration.test_processes import (  # noqa: F401 (fixtures)
    DEADLINE_SECONDS, T0, children, enqueue_jobs, fetch, gate, hold_outbox_insert, poll, waiting_on,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "acme:doc-0:v1"


def other_backends() -> list[int]:
    """Every backend on this test database but this connection's own."""
    return [pid for (pid,) in fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]


def attempt_codes(job_id: int) -> list[tuple[int, int, str]]:
    return list(Attempt.objects.filter(job_id=job_id).order_by("fence").values_list("fence", "attempt", "error_code"))


# -- 1. a connection fault in the commit is never charged to the job --------------------------------

def test_a_commit_killed_before_it_landed_is_retried_on_a_fresh_connection_and_charges_nothing(
        children, hold_outbox_insert):
    (job_id,) = enqueue_jobs(1, FrozenClock(T0))
    with gate(hold_outbox_insert):
        worker = children("work", worker="w1", now=T0.isoformat(), lease_seconds=30)
        (pid,) = poll("the worker held inside its commit", lambda: waiting_on(hold_outbox_insert))
        fetch("SELECT pg_terminate_backend(%s)", [pid])  # the database drops the connection mid-commit
        poll("the backend gone", lambda: not fetch("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]))
    said = worker.finish()[-1]
    assert (said["outcome"], said["fence"]) == ("committed", 1)
    job = Job.objects.get(pk=job_id)
    assert (job.status, job.attempt, job.fence, job.last_error_code) == ("succeeded", 1, 1, "")
    assert attempt_codes(job_id) == [(1, 1, "")]  # one lease, closed by its commit: nothing charged
    publish_pending(clock=FrozenClock(T0))
    assert one_of_each(KEY) == (1, 1, 1)


def test_a_commit_cut_after_it_landed_is_recognised_and_never_repeated(children, proxy):
    (job_id,) = enqueue_jobs(1, FrozenClock(T0))
    proxy.cut_after_commit(b"relayops_commit_result")  # the connection dies between commit and its answer
    said = children("work", port=proxy.port, worker="w1", now=T0.isoformat(), lease_seconds=30).finish()[-1]
    assert proxy.cuts == 1
    assert (said["outcome"], said["fence"]) == ("committed", 1)
    job = Job.objects.get(pk=job_id)
    assert (job.status, job.attempt, job.fence, job.last_error_code) == ("succeeded", 1, 1, "")
    assert attempt_codes(job_id) == [(1, 1, "")]
    publish_pending(clock=FrozenClock(T0))
    assert one_of_each(KEY) == (1, 1, 1)


def test_a_handed_off_commit_cut_after_it_landed_is_recognised_as_handed_off(children, proxy):
    """Its answer lost, the commit is read back: the event went to review with it (published as it was
    written), so the worker owes no relay pass, and there is one review."""
    (job_id,) = enqueue_jobs(1, FrozenClock(T0))
    proxy.cut_after_commit(b"relayops_commit_result")
    said = children("work", port=proxy.port, worker="w1", now=T0.isoformat(), lease_seconds=30,
                    hand_off=True).finish()[-1]
    assert proxy.cuts == 1
    assert (said["outcome"], said["fence"], said["handed_off"]) == ("committed", 1, True)
    assert attempt_codes(job_id) == [(1, 1, "")]
    assert one_of_each(KEY) == (1, 1, 1)  # no relay pass ran


def test_a_commit_cut_after_it_landed_with_the_next_job_s_claim_gives_that_job_back_uncounted(children, proxy):
    """The connection dies after a commit that also claimed the next job: the commit is recognised, and
    the claim the worker never saw is given back at once, uncounted, instead of expiring."""
    first, second = enqueue_jobs(2, FrozenClock(T0))
    proxy.cut_after_commit(b"relayops_commit_and_claim")
    said = children("work", port=proxy.port, worker="w1", now=T0.isoformat(), lease_seconds=30,
                    claim_next=True).finish()[-1]
    assert proxy.cuts == 1
    assert (said["outcome"], said["job_id"], said["carried"]) == ("committed", first, None)
    assert attempt_codes(first) == [(1, 1, "")]
    job = Job.objects.get(pk=second)
    assert (job.status, job.attempt, job.fence, job.lease_expiries) == ("queued", 0, 1, 0)
    assert attempt_codes(second) == [(1, 1, "database_error")]  # its lease on record, closed: not its fault


# -- 2. the heartbeat survives a dropped connection; a job never runs twice at once -----------------

def test_the_heartbeat_reconnects_after_its_connection_is_killed_and_nobody_else_takes_the_job():
    job, _ = queue.enqueue("acme", "doc-0", 1, invoice(0))
    lease_seconds = 1.5
    thieves: list[Any] = []
    killed: list[int] = []

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        first = Job.objects.get(pk=job.pk).lease_until
        wait_for(lambda: Job.objects.get(pk=job.pk).lease_until > first, timeout=10, what="a first beat")
        killed.extend(other_backends())  # the heartbeat thread's connection: the only other one
        for pid in killed:
            fetch("SELECT pg_terminate_backend(%s)", [pid])
        end = time.monotonic() + 3 * lease_seconds  # work well past the lease the dead connection last set
        while time.monotonic() < end:
            checkpoint()
            thieves.append(queue.lease_next("thief", lease_seconds=30))
            time.sleep(0.05)  # the job's own work
        return invoice_extractor(document, checkpoint)

    outcome = process_once("w1", extractor=extractor, heartbeat=True, lease_seconds=lease_seconds)
    assert len(killed) == 1
    assert [t for t in thieves if t is not None] == []  # the lease stayed live: no second runner
    assert (outcome.outcome, outcome.fence) == ("committed", 1)
    job.refresh_from_db()
    assert (job.status, job.fence, job.attempt) == ("succeeded", 1, 1)


def test_a_worker_whose_heartbeat_cannot_reach_the_database_stops_before_its_lease_runs_out(clock):
    queue.enqueue("acme", "doc-0", 1, invoice(0), clock=clock)
    lease = queue.lease_next("w1", lease_seconds=30, clock=clock)
    beat = Heartbeat(lease, lease_seconds=30, clock=clock)  # not started: no beat ever lands
    beat.check()
    clock.advance(29.9)
    beat.check()
    clock.advance(0.1)  # the lease it last extended ran out: another worker may take the job now
    with pytest.raises(LeaseLostError):
        beat.check()


# -- 6. a rescued job is retaken before newer work ---------------------------------------------------

def test_a_job_rescued_from_a_dead_worker_is_retaken_before_newer_work(clock):
    orphan, _ = queue.enqueue("acme", "orphan", 1, invoice(1), clock=clock)
    assert queue.lease_next("dies", lease_seconds=30, clock=clock).job_id == orphan.pk
    clock.advance(10)
    for n in range(5):
        queue.enqueue("acme", f"newer-{n}", 1, invoice(n + 2), clock=clock)
    clock.advance(21)  # the orphan's lease expired; five newer jobs wait
    heir = queue.lease_next("heir", lease_seconds=30, clock=clock)
    assert (heir.job_id, heir.fence) == (orphan.pk, 2)


# -- 7. crashes do not dead-letter a valid document; one that crashes every worker still stops ------

def crash_in(children, worker: str, at: dt.datetime) -> None:
    child = children("work", worker=worker, now=at.isoformat(), lease_seconds=30, crash="after_extract")
    assert child.proc.wait(DEADLINE_SECONDS) == -signal.SIGKILL


def test_a_valid_document_whose_workers_are_killed_three_times_still_succeeds_once(children):
    job, _ = queue.enqueue("acme", "doc-0", 1, invoice(0), max_attempts=1, clock=FrozenClock(T0))
    for n in range(3):
        crash_in(children, f"doomed-{n}", T0 + dt.timedelta(seconds=31 * n))
    clock = FrozenClock(T0 + dt.timedelta(seconds=93))
    assert LeaseRescuer().run_once(clock.now()).dead_lettered == 0
    out = process_once("survivor", clock=clock, lease_seconds=30)
    assert (out.outcome, out.fence) == ("committed", 4)
    job.refresh_from_db()
    assert (job.status, job.attempt, job.lease_expiries) == ("succeeded", 1, 3)
    assert [code for *_, code in attempt_codes(job.pk)] == ["lease_expired"] * 3 + [""]


def test_a_document_that_kills_every_worker_is_dead_lettered_once_its_expiry_budget_is_spent(children):
    job, _ = queue.enqueue("acme", "doc-0", 1, invoice(0), max_lease_expiries=2, clock=FrozenClock(T0))
    for n in range(3):
        crash_in(children, f"doomed-{n}", T0 + dt.timedelta(seconds=31 * n))
    clock = FrozenClock(T0 + dt.timedelta(seconds=93))
    assert queue.lease_next("next", clock=clock) is None
    assert LeaseRescuer().run_once(clock.now()).dead_lettered == 1
    job.refresh_from_db()
    assert (job.status, job.attempt, job.lease_expiries) == ("dead_lettered", 1, 2)
    dead = DeadLetter.objects.get(job=job)
    assert (dead.reason_code, dead.error_code) == ("lease_expiries_exceeded", "lease_expired")


def test_a_lease_left_by_a_drain_that_failed_on_the_database_is_given_back_uncounted():
    job, _ = queue.enqueue("acme", "doc-0", 1, invoice(0))
    stop, calls = StopState(), []

    def drain() -> None:
        calls.append(len(calls))
        if len(calls) == 1:  # mid-job when the database failed beyond the worker's retries
            assert queue.lease_next(liveness.worker_id(), lease_seconds=30) is not None
            raise OperationalError("server closed the connection unexpectedly")
        stop.requested.set()

    assert run_worker(drain=drain, sweep=lambda: None, stop=stop) == WorkerEnd.STOPPED
    job.refresh_from_db()
    assert (job.status, job.attempt, job.lease_expiries, job.fence) == ("queued", 0, 0, 1)
    assert attempt_codes(job.pk) == [(1, 1, "database_error")]  # released at once, not left to expire
