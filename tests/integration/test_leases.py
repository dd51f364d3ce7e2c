"""Leases, fences, deadlines and the lease rescuer, on real PostgreSQL with a frozen clock."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import F

from pipeline.models import DeadLetter
from pipeline import queue
from pipeline.errors import PermanentError, StaleLeaseError
from pipeline.models import Attempt, Job
from pipeline.outbox import commit_result_with_event
from pipeline.reasons import DeadLetterReason, ErrorCode
from pipeline.maintenance.rescuer import LeaseRescuer
from pipeline.queue import ExpiryReport
from pipeline.states import JobStatus
from tests.conftest import invoice
from tests.integration.conftest import row_counts, snapshot

pytestmark = pytest.mark.django_db

FIELDS = {"invoice_number": "INV-1", "total": "1.00"}


def attempts(job_id: int) -> list[tuple]:
    return list(
        Attempt.objects.filter(job_id=job_id).order_by("fence")
        .values_list("fence", "attempt", "worker", "leased_at", "ended_at", "error_code")
    )


def test_nothing_to_lease_returns_none(clock):
    assert queue.lease_next("w1", clock=clock) is None
    queue.enqueue("acme", "later", 1, invoice(), clock=clock)
    Job.objects.update(visible_at=clock.now() + dt.timedelta(seconds=5))  # move the data, not the clock
    assert queue.lease_next("w1", clock=clock) is None


def test_lease_takes_the_oldest_visible_job_and_hides_it(clock):
    first, _ = queue.enqueue("acme", "a", 1, invoice(1), clock=clock)
    enqueued_at = clock.now()
    clock.advance(1)
    second, _ = queue.enqueue("acme", "b", 1, invoice(2), clock=clock)
    lease = queue.lease_next("w1", lease_seconds=30, clock=clock)
    assert (lease.job_id, lease.fence, lease.attempt, lease.worker_id) == (first.pk, 1, 1, "w1")
    assert lease.lease_until == clock.now() + dt.timedelta(seconds=30)
    assert queue.lease_next("w2", lease_seconds=30, clock=clock).job_id == second.pk
    assert queue.lease_next("w3", lease_seconds=30, clock=clock) is None
    job = Job.objects.get(pk=first.pk)
    assert (job.status, job.lease_owner, job.lease_until, job.visible_at) == (
        "leased", "w1", lease.lease_until, enqueued_at,  # the lease hides it; its place in line stays
    )


def test_every_lease_is_recorded_by_the_claim_and_a_takeover_closes_the_expired_one(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(), clock=clock)
    start = clock.now()
    one = queue.lease_next("w1", lease_seconds=30, clock=clock)
    clock.advance(29)
    assert queue.lease_next("w2", lease_seconds=30, clock=clock) is None  # not expired yet
    clock.advance(2)
    two = queue.lease_next("w2", lease_seconds=30, clock=clock)
    assert (two.job_id, two.fence, two.attempt) == (job.pk, 2, 1)  # a takeover is not a new attempt
    taken_at = clock.now()
    assert attempts(job.pk) == [
        (1, 1, "w1", start, taken_at, "lease_expired"),
        (2, 1, "w2", taken_at, None, ""),
    ]
    job.refresh_from_db()
    assert (job.attempt, job.lease_expiries) == (1, 1)


def test_heartbeat_extends_the_lease(clock):
    queue.enqueue("acme", "a", 1, invoice(), clock=clock)
    lease = queue.lease_next("w1", lease_seconds=30, clock=clock)
    clock.advance(20)
    extended = queue.heartbeat(lease, lease_seconds=30, clock=clock)
    assert extended.lease_until == clock.now() + dt.timedelta(seconds=30) and extended.fence == lease.fence
    clock.advance(20)  # past the original expiry, within the extension
    assert queue.lease_next("w2", lease_seconds=30, clock=clock) is None
    clock.advance(11)
    assert queue.lease_next("w2", lease_seconds=30, clock=clock).fence == 2


def test_release_gives_the_job_back_without_counting_the_attempt(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(), clock=clock)
    queue.release(queue.lease_next("w1", clock=clock), clock=clock)
    job.refresh_from_db()
    assert (job.status, job.attempt, job.fence, job.lease_until) == ("queued", 0, 1, None)
    again = queue.lease_next("w2", clock=clock)
    assert (again.fence, again.attempt) == (2, 1)
    assert attempts(job.pk)[0][4:] == (clock.now(), "shutdown")


def test_a_job_past_its_deadline_is_cancelled_by_lease_next_not_leased(clock):
    doomed, _ = queue.enqueue("acme", "doomed", 1, invoice(1), deadline=dt.timedelta(seconds=10), clock=clock)
    alive, _ = queue.enqueue("acme", "alive", 1, invoice(2), clock=clock)
    clock.advance(10)
    lease = queue.lease_next("w1", clock=clock)
    assert lease.job_id == alive.pk  # the cancelled job is recorded and the next one leased, in one call
    doomed.refresh_from_db()
    assert (doomed.status, doomed.last_error_code, doomed.finished_at, doomed.fence, doomed.attempt) == (
        "cancelled", "deadline_exceeded", clock.now(), 0, 0,
    )
    assert not Attempt.objects.filter(job=doomed).exists()
    assert not DeadLetter.objects.exists()


def test_an_expired_lease_past_its_deadline_is_cancelled_not_taken_over(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(), deadline=dt.timedelta(seconds=40), clock=clock)
    queue.lease_next("w1", lease_seconds=30, clock=clock)
    clock.advance(45)
    assert queue.lease_next("w2", clock=clock) is None
    job.refresh_from_db()
    assert (job.status, job.fence, job.lease_owner, job.lease_until) == ("cancelled", 1, "", None)
    assert not DeadLetter.objects.exists()
    # The trigger closes the dead worker's attempt: its lease had expired before the cancel.
    assert attempts(job.pk)[0][4:] == (clock.now(), "lease_expired")


def test_the_commit_closes_the_attempt_in_the_database(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(), clock=clock)
    lease = queue.lease_next("w1", clock=clock)
    clock.advance(3)
    commit_result_with_event(lease, FIELDS, clock=clock)
    assert attempts(job.pk) == [(1, 1, "w1", clock.now() - dt.timedelta(seconds=3), clock.now(), "")]


@pytest.fixture
def zombie(clock):
    """A lease (fence 1) that expired and was taken over (fence 2): the zombie holds the first."""
    queue.enqueue("acme", "a", 1, invoice(), clock=clock)
    old = queue.lease_next("w1", lease_seconds=30, clock=clock)
    clock.advance(31)
    new = queue.lease_next("w2", lease_seconds=30, clock=clock)
    assert (old.job_id, old.fence, new.fence) == (new.job_id, 1, 2)
    return old, new


STALE_CALLS = {
    "heartbeat": lambda lease, clock: queue.heartbeat(lease, clock=clock),
    "ack": lambda lease, clock: queue.ack(lease, clock=clock),
    "nack": lambda lease, clock: queue.nack(lease, PermanentError(ErrorCode.DOCUMENT_MALFORMED), clock=clock),
    "release": lambda lease, clock: queue.release(lease, clock=clock),
    "commit": lambda lease, clock: commit_result_with_event(lease, FIELDS, clock=clock),
}


@pytest.mark.parametrize("call", sorted(STALE_CALLS))
def test_a_zombie_with_an_old_fence_is_refused_and_changes_nothing(zombie, clock, call):
    old, new = zombie
    clock.advance(1)
    before = snapshot()
    with pytest.raises(StaleLeaseError) as info:
        STALE_CALLS[call](old, clock)
    assert (info.value.job_id, info.value.fence) == (old.job_id, 1)
    assert snapshot() == before
    commit_result_with_event(new, FIELDS, clock=clock)  # the current holder still finishes
    assert Job.objects.get(pk=new.job_id).status == "succeeded"


@pytest.mark.parametrize("call", sorted(STALE_CALLS))
def test_a_finished_lease_is_refused_too(clock, call):
    queue.enqueue("acme", "a", 1, invoice(), clock=clock)
    lease = queue.lease_next("w1", clock=clock)
    commit_result_with_event(lease, FIELDS, clock=clock)
    before = snapshot()
    with pytest.raises(StaleLeaseError):
        STALE_CALLS[call](lease, clock)
    assert snapshot() == before


def crash_out(job: Job) -> None:
    """Place the job's lease at its last allowed expiry (as if its workers had crashed that often)."""
    Job.objects.filter(pk=job.pk).update(lease_expiries=F("max_lease_expiries"))


def test_rescuer_dead_letters_a_job_whose_leases_expired_past_their_budget(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(), max_attempts=1, max_lease_expiries=1, clock=clock)
    queue.lease_next("w1", lease_seconds=30, clock=clock)
    clock.advance(31)
    assert queue.lease_next("w2", lease_seconds=30, clock=clock).fence == 2  # one expiry allowed: taken over
    clock.advance(31)
    assert queue.lease_next("w3", clock=clock) is None  # no expiry left: not re-leased, left to the rescuer
    report = LeaseRescuer().run_once(clock.now())
    assert (report.dead_lettered, report.cancelled) == (1, 0)
    job.refresh_from_db()
    assert (job.status, job.last_error_code, job.finished_at, job.attempt, job.lease_expiries) == (
        "dead_lettered", "lease_expired", clock.now(), 1, 1,
    )
    dead = DeadLetter.objects.get(job=job)
    assert (dead.reason_code, dead.error_code, dead.attempts, dead.tenant) == (
        DeadLetterReason.LEASE_EXPIRIES_EXCEEDED, "lease_expired", 1, "acme",
    )
    assert attempts(job.pk)[-1][4:] == (clock.now(), "lease_expired")
    assert LeaseRescuer().run_once(clock.now()) == ExpiryReport(0, 0)


def test_rescuer_leaves_live_leases_and_jobs_with_expiries_left(clock):
    last, _ = queue.enqueue("acme", "last", 1, invoice(1), clock=clock)
    queue.enqueue("acme", "more", 1, invoice(2), clock=clock)
    queue.lease_next("w1", lease_seconds=30, clock=clock)
    queue.lease_next("w1", lease_seconds=60, clock=clock)
    crash_out(last)
    clock.advance(29)
    before = snapshot()
    assert LeaseRescuer().run_once(clock.now()) == ExpiryReport(0, 0)
    assert snapshot() == before
    clock.advance(2)  # "last" expired; "more" not
    assert LeaseRescuer().run_once(clock.now()).dead_lettered == 1
    assert Job.objects.get(document_id="more").status == "leased"


def test_rescuer_cancels_a_crashed_out_job_past_its_deadline(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(), deadline=dt.timedelta(seconds=40), clock=clock)
    queue.lease_next("w1", lease_seconds=30, clock=clock)
    crash_out(job)
    clock.advance(41)
    assert LeaseRescuer().run_once(clock.now()).cancelled == 1
    job.refresh_from_db()
    assert (job.status, job.last_error_code) == (JobStatus.CANCELLED, "deadline_exceeded")
    assert row_counts()["DeadLetter"] == 0
