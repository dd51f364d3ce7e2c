"""The lease heartbeat, one thread per worker process for all its leases, on real PostgreSQL.

A job that ends before a third of its lease starts no thread and opens no connection; leases held
at once are extended together, one statement per tick, each to its own length; a lease taken over is
lost while the others go on being extended; an idle process holds no heartbeat connection; a forked
child beats its own leases only. Observed from outside the code: thread starts (``threading.settrace``
reaches every new thread), Django's ``connection_created``, the rows' ``xmin`` (the transaction that
last wrote them), ``pg_stat_activity``, a real fork.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db.backends.signals import connection_created
from django.db.models import F

from pipeline import queue
from pipeline.errors import InvalidInputError, LeaseLostError
from pipeline.models import Job
from pipeline.runtime.heartbeat import THREAD_NAME, Heartbeat
from pipeline.worker import process_once
from tests.conftest import invoice
from tests.integration.test_faults import other_backends
from tests.integration.test_processes import children, fetch  # noqa: F401 (fixtures)
from tests.integration.test_state_logs import _lines
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # the beater writes on a connection of its own


def beater_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == THREAD_NAME]


@contextlib.contextmanager
def threads_started() -> Iterator[list[str]]:
    """The names of the threads started meanwhile: ``threading.settrace`` runs in every new thread."""
    started: list[str] = []

    def first_call(frame: Any, event: str, arg: Any) -> None:
        started.append(threading.current_thread().name)
        sys.settrace(None)  # once per thread is enough

    threading.settrace(first_call)
    try:
        yield started
    finally:
        threading.settrace(None)


@contextlib.contextmanager
def connections_opened() -> Iterator[list[str]]:
    """The threads that opened a database connection meanwhile (Django's ``connection_created``)."""
    opened: list[str] = []

    def record(sender: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(record)
    try:
        yield opened
    finally:
        connection_created.disconnect(record)


def leases(count: int, clock: Any) -> list[queue.Lease]:
    for n in range(count):
        queue.enqueue("acme", f"doc-{n}", 1, invoice(n), clock=clock)
    return [queue.lease_next(f"w{n}", lease_seconds=30, clock=clock) for n in range(count)]


def rows(*held: queue.Lease) -> dict[int, tuple[dt.datetime, str]]:
    """Each job's lease_until and the transaction that last wrote its row, read in one snapshot."""
    found = fetch("SELECT id, lease_until, xmin::text FROM pipeline_job WHERE id = ANY(%s)",
                  [[lease.job_id for lease in held]])
    return {job_id: (until, xmin) for job_id, until, xmin in found}


def extended_to(clock: Any, *expected: tuple[queue.Lease, float]) -> Any:
    """Each lease's lease_until is now + its length by ``clock``: the rows then, else None."""
    now = rows(*(lease for lease, _ in expected))
    wanted = {lease.job_id: clock.now() + dt.timedelta(seconds=seconds) for lease, seconds in expected}
    return now if all(now[job_id][0] == until for job_id, until in wanted.items()) else None


def lost(beat: Heartbeat) -> bool:
    try:
        beat.check()
    except LeaseLostError:
        return True
    return False


def test_a_job_shorter_than_a_third_of_its_lease_starts_no_thread_and_opens_no_connection():
    for n in range(6):
        queue.enqueue("acme", f"doc-{n}", 1, invoice(n))
    with connections_opened() as opened:
        # The process's first lease starts its beater (if no earlier test did); no job after it does.
        assert process_once("w1", heartbeat=True, lease_seconds=30).outcome == "committed"
        with threads_started() as started:
            outcomes = [process_once("w1", heartbeat=True, lease_seconds=30).outcome for _ in range(5)]
    assert outcomes == ["committed"] * 5
    assert started == []
    assert opened == []  # not even the beater's: no beat came due
    assert len(beater_threads()) == 1


def test_leases_held_at_once_are_extended_in_one_statement_per_tick_by_one_thread(clock):
    a, b = leases(2, clock)
    clock.advance(1)
    with Heartbeat(a, lease_seconds=0.6, clock=clock), Heartbeat(b, lease_seconds=0.6, clock=clock):
        writers = []
        for _ in range(2):
            seen = wait_for(lambda: extended_to(clock, (a, 0.6), (b, 0.6)), timeout=10, what="both leases extended")
            assert seen[a.job_id][1] == seen[b.job_id][1]  # the same transaction wrote both: one statement
            writers.append(seen[a.job_id][1])
            assert len(beater_threads()) == 1
            clock.advance(1)
    assert writers[0] != writers[1]  # two ticks
    # Idle again: the beater closes its connection (an idle worker holds none for heartbeats).
    wait_for(lambda: other_backends() == [], timeout=10, what="the beater's connection closed")


def test_a_lease_taken_over_is_lost_while_another_keeps_being_extended_to_its_own_length(clock, caplog):
    caplog.set_level("WARNING")
    a, b = leases(2, clock)
    thief_until = clock.now() + dt.timedelta(seconds=300)
    Job.objects.filter(pk=a.job_id).update(fence=F("fence") + 1, lease_owner="thief", lease_until=thief_until)
    clock.advance(1)
    with (Heartbeat(a, lease_seconds=0.6, clock=clock) as beat_a,
          Heartbeat(b, lease_seconds=0.9, clock=clock) as beat_b):
        wait_for(lambda: lost(beat_a), timeout=10, what="the stolen lease lost")  # a's lease runs till T0 + 30 s
        for _ in range(2):
            clock.advance(1)
            wait_for(lambda: extended_to(clock, (b, 0.9)), timeout=10, what="the other lease extended")
            beat_b.check()
            assert lost(beat_a)
    stolen = Job.objects.get(pk=a.job_id)
    assert (stolen.fence, stolen.lease_owner, stolen.lease_until) == (2, "thief", thief_until)
    assert [(line["job_id"], line["fence"]) for line in _lines(caplog).get("lease.lost", [])] == [(a.job_id, 1)]


def test_heartbeat_many_extends_each_held_lease_to_its_own_expiry_in_one_statement(clock):
    a, b, stale = leases(3, clock)
    Job.objects.filter(pk=stale.job_id).update(fence=F("fence") + 1)
    later = clock.advance(5)
    extended = queue.heartbeat_many([(a, later + dt.timedelta(seconds=10)), (b, later + dt.timedelta(seconds=20)),
                                     (stale, later + dt.timedelta(seconds=30))])
    assert {key: lease.lease_until for key, lease in extended.items()} == {
        (a.job_id, 1): later + dt.timedelta(seconds=10), (b.job_id, 1): later + dt.timedelta(seconds=20)}
    now = rows(a, b, stale)
    assert [now[lease.job_id][0] for lease in (a, b, stale)] == [
        later + dt.timedelta(seconds=10), later + dt.timedelta(seconds=20), stale.lease_until]
    assert now[a.job_id][1] == now[b.job_id][1]
    assert queue.heartbeat_many([]) == {}
    with pytest.raises(InvalidInputError):
        queue.heartbeat_many([(a, dt.datetime(2026, 3, 1, 9, 0))])  # naive


def test_a_forked_child_beats_its_own_leases_only_and_the_parent_goes_on(children):
    for n in range(3):
        queue.enqueue("acme", f"doc-{n}", 1, invoice(n))
    worker = children("forked_heartbeat")
    out, err = worker.proc.communicate(timeout=60)
    assert worker.proc.returncode == 0, err
    said = {line["side"]: line for line in map(json.loads, out.splitlines())}
    assert (said["child"]["extended_twice"], said["child"]["beaters"]) == (True, 1)
    assert (said["parent"]["child_status"], said["parent"]["extended"]) == (0, True)
    assert "lease.lost" not in err and "lease.heartbeat_failed" not in err  # nobody beat the parent's lease
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert (statuses[said["child"]["job_id"]], statuses[said["parent"]["job_id"]]) == ("succeeded", "leased")
    assert sorted(statuses.values()) == ["leased", "succeeded", "succeeded"]
