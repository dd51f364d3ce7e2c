"""What a single-threaded simulation cannot test, with real processes.

Children are separate Python processes (``tests/integration/procs.py``) on the test database. They are
started together, or held at a chosen point, by PostgreSQL advisory locks; the parent polls the
database with a deadline and never sleeps to synchronise.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import pytest
from django.db import connection

from pipeline import queue
from pipeline.clock import FrozenClock
from pipeline.models import Attempt, ConsumedEvent, Job, OutboxEvent, Result, Review
from pipeline.outbox import commit_result_with_event
from pipeline.relay import publish_pending
from pipeline.worker import process_once
from tests.conftest import invoice
from tests.integration.conftest import one_of_each, snapshot
from tests.integration.procs import lease_from_json
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 30.0
BARRIER = 7_240_001
T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)


def child_env(port: int | None = None) -> dict[str, str]:
    """The child's settings point at *this* test database, not the configured one (through ``port``
    on loopback when given: a proxy in front of the server)."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "", safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else "")
    host = f"127.0.0.1:{port}" if port else f"{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}"
    return {
        **os.environ, "DJANGO_SETTINGS_MODULE": "relayops.settings_test", "LOG_LEVEL": "WARNING",
        "DATABASE_URL": f"postgresql://{auth}@{host}/{db['NAME']}",
    }


class Child:
    def __init__(self, scenario: str, port: int | None = None, **args: Any) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.procs", scenario, json.dumps(args)],
            cwd=ROOT, env=child_env(port), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )

    def read_line(self) -> dict[str, Any]:
        ready, _, _ = select.select([self.proc.stdout], [], [], DEADLINE_SECONDS)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            raise AssertionError(f"child said nothing: {self.proc.communicate()[1]}")
        return json.loads(line)

    def finish(self, stdin: str = "") -> list[dict[str, Any]]:
        out, err = self.proc.communicate(stdin, timeout=DEADLINE_SECONDS)
        assert self.proc.returncode == 0, err
        return [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def children():
    """Start children through this list; any still running when the test ends is killed."""
    started: list[Child] = []

    def start(scenario: str, port: int | None = None, **args: Any) -> Child:
        child = Child(scenario, port, **args)  # exec'd with close_fds: it shares no socket with us
        started.append(child)
        return child

    yield start
    for child in started:
        if child.proc.poll() is None:
            child.proc.kill()
        child.proc.communicate()


def poll(what: str, probe: Callable[[], Any]) -> Any:
    """Probe the database until it answers truthy, or fail after the deadline."""
    return wait_for(probe, timeout=DEADLINE_SECONDS, what=what, interval=0.01)


def fetch(query: str, params: list[Any] | None = None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(query, params or [])
        return cursor.fetchall() if cursor.description else []


def waiting_on(key: int) -> list[int]:
    return [pid for (pid,) in fetch(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())", [key],
    )]


@contextmanager
def gate(key: int, waiters: int = 0):
    """Hold advisory lock ``key``; after the body, wait for ``waiters`` blocked children, then open."""
    fetch("SELECT pg_advisory_lock(%s)", [key])
    try:
        yield
        poll(f"{waiters} children at the barrier", lambda: len(waiting_on(key)) >= waiters)
    finally:
        fetch("SELECT pg_advisory_unlock(%s)", [key])


def enqueue_jobs(count: int, clock: FrozenClock) -> list[int]:
    return [queue.enqueue("acme", f"doc-{n}", 1, invoice(n), clock=clock)[0].pk for n in range(count)]


# -- (a) SIGKILL between the INSERTs and the COMMIT -------------------------------------------------

HOLD_OUTBOX_INSERT = """
CREATE OR REPLACE FUNCTION relayops_test_hold() RETURNS trigger AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared({key});
    RETURN NULL;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS relayops_test_hold ON pipeline_outboxevent;
CREATE TRIGGER relayops_test_hold AFTER INSERT ON pipeline_outboxevent
FOR EACH ROW EXECUTE FUNCTION relayops_test_hold();
"""
RELEASE_OUTBOX_INSERT = """
DROP TRIGGER IF EXISTS relayops_test_hold ON pipeline_outboxevent;
DROP FUNCTION IF EXISTS relayops_test_hold();
"""


@pytest.fixture
def hold_outbox_insert():
    """While the gate is held, a transaction that inserts an outbox row stops right after the insert."""
    fetch(HOLD_OUTBOX_INSERT.format(key=BARRIER + 1))
    yield BARRIER + 1
    fetch(RELEASE_OUTBOX_INSERT)


def tables_written_by(pid: int) -> set[str]:
    return {name for (name,) in fetch(
        "SELECT relation::regclass::text FROM pg_locks WHERE pid = %s AND mode = 'RowExclusiveLock'"
        " AND relation::regclass::text IN ('pipeline_job', 'pipeline_result', 'pipeline_outboxevent')", [pid],
    )}


@pytest.mark.parametrize("killed", [True, False], ids=["sigkill", "control-no-kill"])
def test_sigkill_inside_the_commit_leaves_all_of_it_or_none(children, hold_outbox_insert, killed):
    """The commit is one statement (relayops_commit_result), its own transaction: a worker killed while
    the database runs it cannot leave part of it. PostgreSQL finishes the statement it was sent (a
    killed client is noticed only when the answer is sent) and commits it whole: the job is done, with
    one result and one event, and the next worker finds nothing to do."""
    (job_id,) = enqueue_jobs(1, FrozenClock(T0))
    with gate(hold_outbox_insert):
        worker = children("work", worker="doomed", now=T0.isoformat(), lease_seconds=30)
        (pid,) = poll("the worker held inside its commit", lambda: waiting_on(hold_outbox_insert))
        # The child's commit has completed the job and inserted the result, and waits to insert the event.
        assert tables_written_by(pid) == {"pipeline_job", "pipeline_result", "pipeline_outboxevent"}
        assert "relayops_commit_result" in fetch("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])[0][0]
        assert (Result.objects.count(), OutboxEvent.objects.count()) == (0, 0)  # nothing visible yet
        if killed:
            worker.proc.send_signal(signal.SIGKILL)
            assert worker.proc.wait(DEADLINE_SECONDS) == -signal.SIGKILL
    poll("the worker's backend to end", lambda: not fetch("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]))

    if not killed:
        assert worker.finish()[-1]["outcome"] == "committed"
    job = Job.objects.get(pk=job_id)
    assert (job.status, job.fence, one_of_each("acme:doc-0:v1")[:2]) == ("succeeded", 1, (1, 1))
    (attempt,) = Attempt.objects.filter(job_id=job_id)  # one lease, closed by its commit
    assert (attempt.fence, attempt.error_code, attempt.ended_at is not None) == (1, "", True)
    out = process_once("heir", clock=FrozenClock(T0 + dt.timedelta(seconds=31)), lease_seconds=30)
    assert out.outcome == "idle"
    assert one_of_each("acme:doc-0:v1")[:2] == (1, 1)


@pytest.mark.parametrize(
    ("point", "status_after_kill", "fence_of_result"),
    [("after_extract", "leased", 2), ("after_commit_before_ack", "succeeded", 1)],
)
def test_a_worker_killed_by_its_crash_injector(children, point, status_after_kill, fence_of_result):
    (job_id,) = enqueue_jobs(1, FrozenClock(T0))
    worker = children("work", worker="doomed", now=T0.isoformat(), lease_seconds=30, crash=point)
    assert worker.proc.wait(DEADLINE_SECONDS) == -signal.SIGKILL
    assert Job.objects.get(pk=job_id).status == status_after_kill

    clock = FrozenClock(T0 + dt.timedelta(seconds=31))
    expected = "committed" if status_after_kill == "leased" else "idle"
    assert process_once("heir", clock=clock, lease_seconds=30).outcome == expected
    publish_pending(clock=clock)
    assert one_of_each("acme:doc-0:v1") == (1, 1, 1)
    assert Result.objects.get().fence == fence_of_result


# -- (b) N processes racing lease_next over M jobs -------------------------------------------------

def race_round(children, now: dt.datetime, workers: int, abandon: list[int]) -> dict[str, list]:
    with gate(BARRIER, waiters=workers):
        racers = {f"w{n}": children("race", worker=f"w{n}", now=now.isoformat(), abandon=abandon,
                                    barrier=BARRIER) for n in range(workers)}
    return {name: child.finish()[-1]["leases"] for name, child in racers.items()}


def test_racing_processes_never_hold_one_job_at_once_and_fences_only_grow(children):
    jobs = enqueue_jobs(40, FrozenClock(T0))
    abandoned = jobs[::3]  # these leases are left to expire, as if their worker died

    first = race_round(children, T0, workers=4, abandon=abandoned)
    leased = Counter(job for leases in first.values() for job, _, _ in leases)
    assert leased == Counter(jobs)  # every job leased exactly once: nobody held one at the same time
    assert {fence for leases in first.values() for _, fence, _ in leases} == {1}

    second = race_round(children, T0 + dt.timedelta(seconds=60), workers=4, abandon=[])
    retaken = Counter(job for leases in second.values() for job, _, _ in leases)
    assert retaken == Counter(abandoned)  # only the expired leases, each taken over once
    assert {fence for leases in second.values() for _, fence, _ in leases} == {2}

    # Every job's leases on record: fences 1..k with no gap or repeat, each starting after the last ended.
    owners = {job: name for round_ in (first, second) for name, leases in round_.items() for job, _, _ in leases}
    for job in Job.objects.filter(pk__in=jobs):
        history = list(job.attempts.order_by("fence").values_list("fence", "attempt", "worker", "leased_at"))
        assert [fence for fence, *_ in history] == list(range(1, job.fence + 1))
        assert [attempt for _, attempt, *_ in history] == [1] * job.fence  # a takeover is no new attempt
        assert job.lease_expiries == job.fence - 1
        assert all(later[3] >= earlier[3] + dt.timedelta(seconds=30) for earlier, later in zip(history, history[1:]))
        assert job.status == "succeeded" and history[-1][2] == owners[job.pk]
    assert Result.objects.count() == OutboxEvent.objects.count() == 40
    assert sorted(Result.objects.values_list("fence", flat=True)) == sorted([1] * 26 + [2] * 14)
    assert set(Attempt.objects.filter(fence=1, job_id__in=abandoned).values_list("error_code", flat=True)) == {
        "lease_expired"}


# -- (c) a zombie across processes ------------------------------------------------------------------

def test_a_zombie_process_cannot_heartbeat_ack_nack_release_or_commit(children):
    (job_id,) = enqueue_jobs(1, FrozenClock(T0))
    zombie = children("zombie", worker="zombie", now=(T0 + dt.timedelta(seconds=1)).isoformat())
    old = lease_from_json(zombie.read_line()["lease"])
    assert (old.job_id, old.fence) == (job_id, 1)

    clock = FrozenClock(T0 + dt.timedelta(seconds=40))  # the zombie paused; its lease expired
    new = queue.lease_next("heir", lease_seconds=30, clock=clock)
    assert (new.job_id, new.fence) == (job_id, 2)
    before = snapshot()
    replies = zombie.finish("heartbeat\nack\nnack\nrelease\ncommit\nexit\n")
    assert replies == [{"call": call, "error": "StaleLeaseError"}
                       for call in ("heartbeat", "ack", "nack", "release", "commit")]
    assert snapshot() == before
    commit_result_with_event(new, {"by": "heir"}, clock=clock)
    assert Result.objects.get().data == {"by": "heir"}


# -- (c2) an operator cancels a job a live worker process holds -------------------------------------

def test_a_cancelled_leased_job_fences_out_its_worker_process_and_refuses_its_late_commit(children):
    from controls.services import cancel_job
    from dlq.models import AuditEntry
    from pipeline.invariants import check_all

    job, _ = queue.enqueue("acme", "held", 1, invoice(1))
    gate_key = BARRIER + 7
    with gate(gate_key, waiters=1):
        worker = children("gated_work", worker="held-worker", lease_seconds=30, gate=gate_key)
        leased = poll("the worker's lease", lambda: Job.objects.filter(pk=job.pk, status="leased").first())
        assert leased.lease_owner == "held-worker"
        cancel_job(job.pk, factory_operator("acme"), reason="customer withdrew the document")
        job.refresh_from_db()
        assert (job.status, job.last_error_code, job.lease_until) == ("cancelled", "cancelled", None)
    # The gate is open: the worker's extraction returns and it tries to commit with its old fence.
    (said,) = worker.finish()
    assert said == {"outcome": "lease_lost", "job_id": job.pk, "fence": 1}
    job.refresh_from_db()
    assert job.status == "cancelled" and job.fence == 1
    assert not Result.objects.exists() and not OutboxEvent.objects.exists() and not Review.objects.exists()
    (attempt,) = Attempt.objects.filter(job=job)
    assert attempt.ended_at is not None and attempt.error_code == "cancelled"
    assert attempt.extractor.endswith("gated_work.<locals>.extractor")  # what it spent is kept
    entry = AuditEntry.objects.get(action="cancel")
    assert (entry.job_id, entry.operator, entry.reason, entry.detail) == (
        job.pk, "olivia", "customer withdrew the document", "was leased")
    assert check_all().holds


def factory_operator(*tenants: str):
    from tenancy.roles import ensure_roles
    from tests.admin.factories import member

    ensure_roles()  # a transactional test may run after another flushed the groups
    return member("olivia", *tenants)


# -- (d) two relays at once --------------------------------------------------------------------------

@pytest.mark.parametrize("recording", [True, False], ids=["publisher", "review-handoff-in-the-claim"])
def test_two_relays_at_once_publish_every_event_and_none_twice(children, recording):
    clock = FrozenClock(T0)
    for job_id in enqueue_jobs(30, clock):
        commit_result_with_event(queue.lease_next("w1", clock=clock), {"job": job_id}, clock=clock)
    events = sorted(str(e) for e in OutboxEvent.objects.values_list("event_id", flat=True))

    with gate(BARRIER, waiters=2):
        relays = [children("relay", batch_size=3, barrier=BARRIER, recording=recording) for _ in range(2)]
    reports = [relay.finish()[-1] for relay in relays]
    if recording:
        delivered = [event for report in reports for event in report["delivered"]]
        assert sorted(delivered) == events, [len(r["delivered"]) for r in reports]  # all, none twice
    assert sum(r["marked"] for r in reports) == 30 and sum(r["lost_claims"] for r in reports) == 0
    assert ConsumedEvent.objects.count() == Review.objects.count() == 30
    assert not OutboxEvent.objects.filter(published_at__isnull=True).exists()
    assert set(OutboxEvent.objects.values_list("publish_attempts", flat=True)) == {1}


def test_a_worker_stuck_after_a_hurry_releases_its_lease_and_exits(children):
    """The second stop signal's watchdog: a job that never returns to the interrupt is not waited for."""
    job, _ = queue.enqueue("acme", "stuck", 1, invoice(1))
    child = children("stuck", force_after=0.5)
    said = child.read_line()
    assert said["job_id"] == job.pk
    assert child.proc.wait(DEADLINE_SECONDS) == 1
    job.refresh_from_db()
    assert (job.status, job.attempt, job.lease_owner) == ("queued", 0, said["worker"])
    assert list(job.attempts.values_list("error_code", flat=True)) == ["shutdown"]


def test_a_stuck_worker_whose_interrupt_left_the_log_lock_held_still_exits(children):
    """The watchdog's last words and release wait on locks the stuck main thread may hold (here the log
    handlers'): it gives them a bounded time, then the worker exits, its lease left to expire."""
    job, _ = queue.enqueue("acme", "stuck-locked", 1, invoice(1))
    child = children("stuck", force_after=0.5, hold_log_lock=True)
    assert child.read_line()["job_id"] == job.pk
    assert child.proc.wait(DEADLINE_SECONDS) == 1


def test_a_hurry_that_lands_while_the_stop_handler_sets_its_event_still_ends_the_worker(children):
    """A second signal soon after the first (a loaded machine, the handler descheduled): the hurry's
    handler runs inside the stop handler's Event.set(), in the same thread, and must not wait for the
    lock that thread holds. The watchdog then releases the lease and ends the worker."""
    job, _ = queue.enqueue("acme", "stuck-inside", 1, invoice(1))
    child = children("stuck", force_after=0.5, hurried_inside_stop=True)
    assert child.read_line()["job_id"] == job.pk
    assert child.proc.wait(DEADLINE_SECONDS) == 1
    job.refresh_from_db()
    assert (job.status, job.attempt) == ("queued", 0)
