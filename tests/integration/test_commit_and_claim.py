"""A commit that claims the next job in the same call (``claim_next``): behind a backlog a drain runs a job
per call and per transaction, and every check of the commit and of the claim holds as when they ran apart."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import Error, connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from pipeline import queue
from pipeline.clock import system_clock
from pipeline.errors import IdempotencyConflictError, LeaseLostError, StaleLeaseError
from pipeline.extraction.rules import invoice_extractor
from pipeline.models import Attempt, Job, Result, Review
from pipeline.outbox import commit_result_with_event
from pipeline.processing import process_once
from pipeline.runtime.drain import Drain, DrainEnding, DrainReport
from pipeline.runtime.shutdown import StopState
from tests.conftest import invoice

pytestmark = pytest.mark.django_db(transaction=True)

FIELDS = {"invoice_number": "INV-1", "total": "1.00"}


def enqueue(n: int, clock) -> list[Job]:
    return [queue.enqueue("acme", f"inv-{i}", 1, invoice(i), clock=clock)[0] for i in range(n)]


def next_claim(clock) -> dict:
    return queue.claim_params("w1", clock=clock)


def untouched(job: Job) -> bool:
    """Still queued as enqueued: never leased, no attempt row."""
    job.refresh_from_db()
    return (job.status, job.fence, job.attempt) == ("queued", 0, 0) and not Attempt.objects.filter(job=job).exists()


def test_a_commit_claims_the_next_job_in_its_own_call_and_transaction(clock):
    first, second = enqueue(2, clock)
    lease = queue.lease_next("w1", clock=clock)
    with CaptureQueriesContext(connection) as queries:
        outcome = commit_result_with_event(lease, FIELDS, clock=clock, claim_next=next_claim(clock))
    called = [q["sql"].split("(")[0].split()[-1] for q in queries]
    assert called == ["relayops_commit_and_claim"]  # one statement, in autocommit: one transaction
    assert not outcome.deduped and outcome.claim_seconds > 0
    nxt = queue.take_claimed(outcome.claimed)
    assert (nxt.job_id, nxt.fence, nxt.attempt, nxt.worker_id, nxt.more_waiting) == (second.pk, 1, 1, "w1", False)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status, second.lease_owner) == ("succeeded", "leased", "w1")
    assert Attempt.objects.get(job=second).ended_at is None  # its attempt is open, as a claim of its own opens it
    assert Result.objects.get().job_id == first.pk


def test_nothing_claimable_is_a_commit_alone(clock):
    enqueue(1, clock)
    outcome = commit_result_with_event(queue.lease_next("w1", clock=clock), FIELDS, clock=clock,
                                       claim_next=next_claim(clock))
    assert outcome.claimed is None and Job.objects.get().status == "succeeded"


def test_a_stale_commit_claims_nothing(clock):
    first, second = enqueue(2, clock)
    lease = queue.lease_next("w1", clock=clock)
    Job.objects.filter(pk=first.pk).update(fence=F("fence") + 1)  # taken over meanwhile
    with pytest.raises(StaleLeaseError):
        commit_result_with_event(lease, FIELDS, clock=clock, claim_next=next_claim(clock))
    assert untouched(second) and not Result.objects.exists()


def test_a_conflicting_result_rolls_the_claim_back_with_the_commit(clock):
    first, second, third = enqueue(3, clock)
    lease = queue.lease_next("w1", clock=clock)
    Job.objects.filter(pk=third.pk).update(status="succeeded", finished_at=clock.now())  # holds the key's earlier result
    Result.objects.create(job=third, tenant="acme", idempotency_key=lease.idempotency_key, payload_hash="other",
                          data={}, fence=1, created_at=clock.now())
    with pytest.raises(IdempotencyConflictError):
        commit_result_with_event(lease, FIELDS, clock=clock, claim_next=next_claim(clock))
    first.refresh_from_db()
    assert first.status == "leased" and untouched(second)


def test_a_deduped_commit_claims_the_next_job(clock):
    first, second, third = enqueue(3, clock)
    lease = queue.lease_next("w1", clock=clock)
    Job.objects.filter(pk=third.pk).update(status="succeeded", finished_at=clock.now())
    Result.objects.create(job=third, tenant="acme", idempotency_key=lease.idempotency_key,
                          payload_hash=lease.payload_hash, data=FIELDS, fence=1, created_at=clock.now())
    outcome = commit_result_with_event(lease, FIELDS, clock=clock, claim_next=next_claim(clock))
    assert outcome.deduped and outcome.claimed["id"] == second.pk


def test_a_job_past_its_deadline_met_by_the_commit_claim_is_cancelled_not_carried(clock):
    first, late = enqueue(2, clock)
    Job.objects.filter(pk=late.pk).update(deadline_at=clock.now())
    done = process_once("w1", clock=clock, claim_next=lambda: True)
    late.refresh_from_db()
    assert done.outcome == "committed" and done.carried is None
    assert (late.status, late.last_error_code) == ("cancelled", "deadline_exceeded")


def test_behind_a_backlog_a_drain_runs_each_job_in_one_call(clock):
    """Four jobs: the first claimed alone; each commit claims the next; the last claim saw none waiting, so
    the last commit claims nothing. Four jobs, five job statements, each its own transaction."""
    jobs = enqueue(4, clock)
    drain = Drain("node:1", max_seconds=5, poll_seconds=60, batch_window_seconds=60, clock=clock)
    report = DrainReport()
    with CaptureQueriesContext(connection) as queries:
        while drain._step(report):
            pass
    calls = [name for q in queries for name in ("relayops_claim(", "relayops_commit_and_claim(",
                                                 "relayops_commit_result(") if name in q["sql"]]
    assert calls == ["relayops_claim(", *["relayops_commit_and_claim("] * 3, "relayops_commit_result("]
    assert not any(q["sql"] in ("BEGIN", "COMMIT") for q in queries if "relayops" in q["sql"])
    assert report.jobs == 4 and Review.objects.count() == 4
    assert list(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", "fence", "attempt").distinct()) == [
        ("succeeded", 1, 1)]
    assert Attempt.objects.filter(ended_at__isnull=False, error_code="").count() == 4


def test_a_drain_asked_to_stop_mid_job_claims_nothing_with_its_commit(clock):
    first, second = enqueue(2, clock)
    stop = StopState()

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        stop.requested.set()  # SIGTERM while the job runs: it finishes, and no other job is taken
        return invoice_extractor(document, checkpoint)

    report = Drain("node:1", max_seconds=5, poll_seconds=60, stop=stop, extractor=extractor, clock=clock).run()
    assert (report.ended, report.jobs) == (DrainEnding.STOPPED, 1)
    assert untouched(second)


def test_a_stopping_drain_gives_back_the_job_its_last_commit_claimed_uncounted(clock):
    first, second, third = enqueue(3, clock)
    stop = StopState()
    drain = Drain("node:1", max_seconds=5, poll_seconds=60, stop=stop, clock=clock)
    report = DrainReport()
    assert drain._step(report)  # the first job, and the second claimed with its commit
    second.refresh_from_db()
    assert second.status == "leased"
    stop.requested.set()
    assert drain._loop(report, None, end=time.monotonic() + 60) == DrainEnding.STOPPED
    second.refresh_from_db()
    assert (second.status, second.attempt, second.fence) == ("queued", 0, 1)  # back in line, the attempt not counted
    assert Attempt.objects.get(job=second).error_code == "shutdown"
    assert untouched(third) and report.jobs == 1


def test_a_drain_past_its_budget_runs_the_job_it_carries_and_claims_no_other(clock):
    first, second, third = enqueue(3, clock)
    drain = Drain("node:1", max_seconds=5, poll_seconds=60, stop=StopState(), clock=clock)
    report = DrainReport()
    assert drain._step(report)
    drain._end = time.monotonic() - 1  # the budget ran out after that step
    assert drain._loop(report, None, end=drain._end) == DrainEnding.BUDGET
    second.refresh_from_db()
    assert second.status == "succeeded" and report.jobs == 2
    assert untouched(third)


def test_the_heartbeat_keeps_a_carried_job_s_lease_until_it_runs():
    """Between the commit that claimed it and its run (a relay pass, say) the job's lease is extended."""
    first, second = enqueue(2, system_clock)
    done = process_once("w1", heartbeat=True, lease_seconds=0.6, claim_next=lambda: True)
    carried = done.carried
    assert carried is not None and carried.lease.job_id == second.pk
    try:
        first_until = Job.objects.get(pk=second.pk).lease_until
        deadline = time.monotonic() + 10
        while Job.objects.get(pk=second.pk).lease_until <= first_until:
            assert time.monotonic() < deadline, "the carried lease was never extended"
            time.sleep(0.02)
    finally:
        carried.release()
    second.refresh_from_db()
    assert (second.status, second.attempt) == ("queued", 0)
    assert Job.objects.get(pk=second.pk).lease_until is None


class DroppingPublisher:
    """A publisher during whose delivery the database drops the drain's connection."""

    def publish(self, event: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def test_a_drain_that_fails_on_the_database_gives_back_the_job_it_carries_uncounted(clock):
    """The relay pass after a commit that claimed the next job fails on a dropped connection: the drain
    ends (its host starts another) and the job it carried goes back to the line at once, uncounted."""
    first, second, third = enqueue(3, clock)
    drain = Drain("node:1", max_seconds=5, poll_seconds=60, stop=StopState(), clock=clock,
                  publisher=DroppingPublisher())
    with pytest.raises(Error):
        drain.run()
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "succeeded"
    assert (second.status, second.attempt, second.fence) == ("queued", 0, 1)
    assert Attempt.objects.get(job=second).error_code == "database_error"
    assert untouched(third)


def test_a_carried_job_whose_lease_was_lost_while_it_waited_is_not_worked_on():
    first, second = enqueue(2, system_clock)
    done = process_once("w1", heartbeat=True, lease_seconds=0.6, claim_next=lambda: True)
    Job.objects.filter(pk=second.pk).update(fence=F("fence") + 1, lease_owner="thief:1")  # taken over meanwhile
    deadline = time.monotonic() + 10
    while True:  # until the heartbeat's next beat finds the lease taken
        try:
            done.carried.beat.check()
        except LeaseLostError:
            break
        assert time.monotonic() < deadline, "the heartbeat never noticed the lost lease"
        time.sleep(0.02)
    ran: list[int] = []

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        ran.append(document.attempt)
        return invoice_extractor(document, checkpoint)

    again = process_once("w1", heartbeat=True, carried=done.carried, extractor=extractor)
    assert again.outcome == "lease_lost" and ran == []


def test_a_raw_statement_s_rows_are_keyed_by_its_column_names_as_the_server_sent_them():
    """``sql.fetch`` reads the names from PostgreSQL's result rather than psycopg's column descriptions:
    the same names, in the same order, quoted and non-ASCII ones included."""
    from pipeline import sql

    statement = 'SELECT 1 AS id, %(word)s AS "Größe", NULL::timestamptz AS "lease until", 2 AS id2'
    rows = sql.fetch(statement, {"word": "x"})
    with connection.cursor() as cursor:
        cursor.execute(statement, {"word": "x"})
        described = [column[0] for column in cursor.description]
    assert list(rows[0]) == described == ["id", "Größe", "lease until", "id2"]
    assert rows == [{"id": 1, "Größe": "x", "lease until": None, "id2": 2}]
    assert sql.fetch("SELECT 1 AS id WHERE false", {}) == []
