"""Drains in-process on real PostgreSQL: lease loss abandons the job, stop and hurry, release without
an attempt."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.db.models import F

from pipeline import queue
from pipeline.runtime.drain import Drain
from pipeline.extraction.rules import invoice_extractor
from pipeline.models import Attempt, DrainPresence, Job, OutboxEvent, Result, Review
from pipeline.processing import Outcome, WorkOutcome
from pipeline.runtime.shutdown import StopState
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db(transaction=True)


def steal(job_id: int) -> None:
    """What a rescuing worker does after the lease expired: a new fence, a new owner."""
    until = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30)
    Job.objects.filter(pk=job_id).update(fence=F("fence") + 1, lease_owner="thief:1", lease_until=until,
                                         visible_at=until, leased_at=until - dt.timedelta(seconds=30))


def test_a_worker_that_loses_its_lease_abandons_the_job_at_its_next_checkpoint():
    job, _ = queue.enqueue("acme", "slow", 1, invoice(1, work_seconds=3))

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        steal(job.pk)  # while we extract, another worker takes the job over
        return invoice_extractor(document, checkpoint)  # checkpoints raise once the heartbeat notices

    outcome = process_once("w1", extractor=extractor, heartbeat=True, lease_seconds=0.6)
    assert outcome.outcome == "lease_lost"
    assert not Result.objects.exists() and not OutboxEvent.objects.exists()
    job.refresh_from_db()
    assert (job.status, job.lease_owner, job.fence) == ("leased", "thief:1", 2)


def test_a_worker_without_checkpoints_is_refused_at_commit():
    job, _ = queue.enqueue("acme", "fast", 1, invoice(2))

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        steal(job.pk)
        return invoice_extractor(document, lambda: None)

    assert process_once("w1", extractor=extractor, heartbeat=True).outcome == "lease_lost"
    assert not Result.objects.exists()


def test_a_drain_runs_jobs_publishes_and_ends_at_its_budget():
    jobs = [queue.enqueue("acme", f"doc-{n}", 1, invoice(n))[0] for n in range(3)]
    report = Drain("node:1", max_seconds=0.5, poll_seconds=0.1, stop=StopState()).run()
    assert (report.jobs, report.published, report.ended) == (3, 3, "budget")
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True)) == {"succeeded"}


def test_a_drain_asked_to_stop_takes_no_job():
    queue.enqueue("acme", "doc", 1, invoice(1))
    stop = StopState()
    stop.requested.set()
    assert Drain("node:1", max_seconds=5, stop=stop).run().ended == "stopped"
    assert Job.objects.get().status == "queued"


def test_a_hurried_drain_releases_its_lease_without_counting_the_attempt():
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1))
    stop = StopState()

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        stop.hurry()  # what SIGUSR2 does in the main thread mid-job
        raise AssertionError("unreachable")

    report = Drain("node:1", max_seconds=5, stop=stop,
                   work=lambda worker_id: process_once(worker_id, extractor=extractor)).run()
    assert (report.ended, report.released) == ("interrupted", 1)
    job.refresh_from_db()
    assert (job.status, job.attempt, job.fence) == ("queued", 0, 1)
    assert Attempt.objects.get(job=job).error_code == "shutdown"


def test_a_drain_is_present_from_its_start_even_when_its_first_job_is_long():
    stop = StopState()
    present_when_working: list[bool] = []

    def long_first_job(worker_id: str) -> WorkOutcome:
        present_when_working.append(DrainPresence.objects.filter(worker=worker_id).exists())
        stop.requested.set()  # the job "ends" with a stop request: the drain exits after it
        return WorkOutcome(Outcome.COMMITTED, 1, 1)

    Drain("node:7", max_seconds=5, outbox=False, stop=stop, work=long_first_job).run()
    assert present_when_working == [True]


@pytest.mark.parametrize(("window", "waited", "passes"), [(60.0, 120, 1), (60.0, 0, 5), (0.0, 120, 5)])
def test_behind_a_backlog_a_drain_relays_its_commits_in_batches(window, waited, passes):
    """Behind a backlog (its jobs waited in line) a drain publishes its commits once no job is left, in
    one relay pass; keeping up (no wait), or with no window, after every job. The drain's clock says
    how long the jobs waited."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from pipeline.clock import FrozenClock
    from pipeline.models import Review

    enqueued = FrozenClock(dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.timezone.utc))
    for n in range(5):
        queue.enqueue("acme", f"doc-{n}", 1, invoice(n), clock=enqueued)
    clock = FrozenClock(enqueued.now() + dt.timedelta(seconds=waited))
    stop = StopState()
    done: list[int] = []

    def work(worker_id: str) -> WorkOutcome:
        outcome = process_once(worker_id, clock=clock, announce=False, commit_times=drain.commit_times)
        done.append(outcome.job_id or 0)
        if len([job for job in done if job]) == 5:
            stop.requested.set()  # the backlog is done: the drain ends after this step
        return outcome

    drain = Drain("node:1", max_seconds=60, poll_seconds=60, batch_window_seconds=window, clock=clock,
                  work=work, stop=stop)
    with CaptureQueriesContext(connection) as queries:
        report = drain.run()
    assert (report.jobs, report.published, report.ended) == (5, 5, "stopped")
    relay_passes = [q for q in queries if "publish_attempts = publish_attempts + 1" in q["sql"]]  # its claims
    assert len(relay_passes) == passes
    assert Review.objects.count() == 5 and not OutboxEvent.objects.filter(published_at__isnull=True).exists()
    # Each commit's time is kept, recorded with a relay pass or when the drain ends.
    assert Attempt.objects.filter(commit_seconds__isnull=False).count() == 5


def test_a_busy_drain_whose_commits_hand_off_still_publishes_what_another_process_rang_for():
    """Behind a backlog every commit hands its event to review, so the drain owes the relay nothing; an
    event someone else wrote (here a decision's) rings the outbox doorbell, which the drain hears between
    its busy steps and publishes at its next one, not once the backlog is done."""
    from django.db import transaction

    from pipeline import outbox
    from pipeline.runtime import wakeups

    for n in range(6):
        queue.enqueue("acme", f"doc-{n}", 1, invoice(n))
    stop = StopState()
    seen: dict[str, Any] = {"calls": 0}
    ours = wakeups.Listener([wakeups.OUTBOX])  # tells the test when the doorbell has gone out

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        seen["calls"] += 1
        if seen["calls"] == 2:  # past its first step (which looks at the outbox as any drain's start does)
            with transaction.atomic():
                seen["event"] = outbox.emit("acme", "review.decided", "acme:decision:1", {"review_id": 1})
            assert wakeups.OUTBOX in ours.wait(10)  # rung: every listener has it now
        if seen["calls"] == 5:  # still busy: a job is left after this one
            event = OutboxEvent.objects.get(event_id=seen["event"])
            seen["published_while_busy"] = event.published_at is not None
        if seen["calls"] == 6:
            stop.requested.set()
        return invoice_extractor(document, checkpoint)

    try:
        report = Drain("node:1", max_seconds=60, poll_seconds=60, extractor=extractor, stop=stop).run()
    finally:
        ours.close()
    assert report.jobs == 6 and seen["published_while_busy"] is True
    assert OutboxEvent.objects.filter(published_at__isnull=True).count() == 0


@pytest.mark.parametrize(("poll", "advances", "checked_at"), [
    (60, {2: 61}, 3),  # a poll interval passes during one job
    (5, dict.fromkeys(range(1, 6), 2.0), 5),  # two seconds a job: each commit's read sees the event
], ids=["one-long-job", "commits-read-it"])
def test_a_drain_woken_for_job_after_job_still_relays_once_a_poll_interval_has_passed(poll, advances, checked_at):
    """A drain that keeps up is woken by the jobs doorbell for each job (never busy behind a backlog) and
    never parks long enough for its poll. Events no doorbell announces (a backoff that ended, the claim of
    a drain that died; here one written without its doorbell) are still published once ``poll_seconds``
    have passed since its last look at the outbox: a relay pass, or a commit's read that saw nothing for
    one (this one sees the event, so it does not count)."""
    import time

    skew = [0.0]
    stop = StopState()
    seen: dict[str, Any] = {"calls": 0}
    queue.enqueue("acme", "doc-0", 1, invoice(0))

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        seen["calls"] += 1
        calls = seen["calls"]
        if calls == 2:  # past the first step's relay pass (a drain's start looks at the outbox)
            OutboxEvent.objects.create(tenant="acme", topic="review.decided", idempotency_key="acme:decision:1",
                                       payload={"review_id": 1}, created_at=dt.datetime.now(dt.timezone.utc))
        skew[0] += advances.get(calls, 0.0)  # the drain's clock moves on while it works
        if calls == checked_at:
            event = OutboxEvent.objects.get(idempotency_key="acme:decision:1")
            seen["published_while_working"] = event.published_at is not None
            stop.requested.set()
        else:
            queue.enqueue("acme", f"doc-{calls}", 1, invoice(calls))  # the next job arrives as this one runs
        return invoice_extractor(document, checkpoint)

    report = Drain("node:1", max_seconds=600, poll_seconds=poll, extractor=extractor, stop=stop,
                   monotonic=lambda: time.monotonic() + skew[0]).run()
    assert report.jobs == checked_at and seen["published_while_working"] is True


def test_a_drain_taking_jobs_one_at_a_time_sends_each_its_claim_and_commit_and_nothing_else():
    """Jobs that come one at a time meet the drain idle: each costs its claim and its commit. Whatever the
    drain owes per second rides on those commits or needs no statement: its presence (every
    PRESENCE_BUSY_SECONDS), its earlier commits' times (COMMIT_TIMES_SECONDS), and the poll's look at the
    outbox, which each commit's read makes when it saw nothing for a relay pass to take. Here each job
    takes two seconds of the drain's clock, so every one of those falls due more than once."""
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from pipeline.runtime.drain import COMMIT_TIMES_SECONDS, PRESENCE_BUSY_SECONDS

    jobs, per_job = 8, 2.0
    skew = [0.0]
    stop = StopState()
    seen = {"calls": 0}
    queue.enqueue("acme", "doc-0", 1, invoice(0))

    def extractor(document: Any, checkpoint: Any) -> dict[str, Any]:
        seen["calls"] += 1
        skew[0] += per_job
        if seen["calls"] < jobs:  # the next job arrives after this one's claim, which saw none waiting
            queue.enqueue("acme", f"doc-{seen['calls']}", 1, invoice(seen["calls"]))
        else:
            stop.requested.set()
        return invoice_extractor(document, checkpoint)

    poll = 3.0
    assert per_job * (jobs - 1) > max(poll, COMMIT_TIMES_SECONDS, PRESENCE_BUSY_SECONDS) * 2
    with CaptureQueriesContext(connection) as queries:
        report = Drain("node:1", max_seconds=600, poll_seconds=poll, extractor=extractor, stop=stop,
                       monotonic=lambda: time.monotonic() + skew[0]).run()
    assert report.jobs == jobs and Review.objects.count() == jobs
    statements = [" ".join(q["sql"].split()) for q in queries.captured_queries
                  if not q["sql"].lstrip().startswith("WITH inserted AS")]  # the test's enqueues
    second = [n for n, text in enumerate(statements) if "relayops_claim(" in text][1]
    # After the first job's step (a drain's start looks at the outbox): the others' claims and commits
    # only, then the drain's end writes the commits' times that no commit carried yet.
    kinds = ["claim" if "relayops_claim(" in text else "commit" if "relayops_commit_result(" in text else text[:40]
             for text in statements[second:]]
    assert kinds == ["claim", "commit"] * (jobs - 1) + ["UPDATE pipeline_attempt SET commit_secon"], kinds
    carried = [text for text in statements if "relayops_commit_result(" in text and "pipeline_attempt" in text]
    presence = [text for text in statements if "relayops_commit_result(" in text and "pipeline_drainpresence" in text]
    assert len(carried) >= 1 and len(presence) >= 2  # the times and the presence rode on commits
    assert Attempt.objects.filter(commit_seconds__isnull=False).count() == jobs
    assert DrainPresence.objects.get(worker="node:1").progress_at is not None


def test_an_event_parked_by_its_interrupted_claims_does_not_keep_parked_drains_looking():
    """An event whose publication was interrupted MAX_PUBLISH_ATTEMPTS times is parked with its last,
    expired claim. No relay claims it again, so its expiry is no moment to look at: a drain parks on."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from pipeline.models import MAX_PUBLISH_ATTEMPTS

    now = dt.datetime.now(dt.timezone.utc)
    OutboxEvent.objects.create(tenant="acme", topic="review.decided", idempotency_key="acme:decision:1",
                               payload={"review_id": 1}, created_at=now, publish_attempts=MAX_PUBLISH_ATTEMPTS,
                               claim_token=uuid.uuid4(), claimed_until=now - dt.timedelta(seconds=30))
    with CaptureQueriesContext(connection) as queries:
        Drain("node:1", max_seconds=1.0, poll_seconds=60).run()
    looks = [q["sql"] for q in queries.captured_queries if "relayops_claim(" in q["sql"]]
    assert len(looks) == 1, len(queries.captured_queries)  # its start's; it looked every 20 ms before


def test_a_jobs_doorbell_heard_between_busy_steps_ends_the_next_park_at_once():
    """Taking the doorbells between busy steps empties the listener: a jobs doorbell among them must still
    wake the drain, so its next park ends at once (no wait for the poll), woken by the jobs doorbell."""
    import time

    from pipeline.runtime import wakeups
    from pipeline.runtime.drain import DrainReport

    listener = wakeups.Listener([wakeups.JOBS, wakeups.OUTBOX])
    try:
        drain = Drain("node:1", max_seconds=60, poll_seconds=60)
        queue.enqueue("acme", "doc-0", 1, invoice(0))
        deadline = time.monotonic() + 10
        while wakeups.JOBS not in drain._heard and time.monotonic() < deadline:  # a NOTIFY takes a moment
            drain._hear(listener)
            time.sleep(0.005)
        assert wakeups.JOBS in drain._heard
        assert listener.wait(0.0) == set()  # taken: the listener has nothing left
        report = DrainReport()
        began = time.monotonic()
        drain._park(listener, time.monotonic() + 60, report)
        assert time.monotonic() - began < 5 and report.wakeups == 1 and drain._woken == {wakeups.JOBS}
    finally:
        listener.close()


def test_a_drain_that_ends_publishes_the_commits_it_owes():
    """A drain relays its own commits (it rings no doorbell for them): ending within the window, it
    publishes them before it goes."""
    for n in range(3):
        queue.enqueue("acme", f"doc-{n}", 1, invoice(n))
    Job.objects.update(visible_at=F("visible_at") - dt.timedelta(seconds=120))  # behind a backlog
    stop = StopState()
    ran: list[int] = []

    def work(worker_id: str) -> WorkOutcome:
        outcome = process_once(worker_id, announce=False)
        ran.append(outcome.job_id or 0)
        if len(ran) == 2:
            stop.requested.set()  # the worker is told to stop after its second job, mid-backlog
        return outcome

    report = Drain("node:1", max_seconds=5, poll_seconds=0.1, batch_window_seconds=60, work=work, stop=stop).run()
    assert (report.jobs, report.published, report.ended) == (2, 2, "stopped")
    assert OutboxEvent.objects.filter(published_at__isnull=True).count() == 0


def test_the_relay_settings_are_checked():
    from pipeline.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="batch_size"):
        Drain("node:1", max_seconds=1, batch_size=0)
    with pytest.raises(InvalidInputError, match="batch_window_seconds"):
        Drain("node:1", max_seconds=1, batch_window_seconds=-1)


def _kill_own_backend() -> None:
    """The database drops this process's Django connection (as a restart or an idle timeout would)."""
    import psycopg
    from django.db import connection

    pid = connection.connection.info.backend_pid
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.mark.parametrize("parked, survives", [(0.1, False), (1.5, True)])
def test_a_drain_checks_its_connection_after_a_long_park_and_not_after_a_short_one(parked, survives):
    from django.db import DatabaseError

    from pipeline.runtime.drain import DrainReport

    now = [1000.0]
    stopped = StopState()
    drain = Drain("node:1", max_seconds=60, poll_seconds=60, stop=stopped, monotonic=lambda: now[0])
    report = DrainReport()
    assert drain._step(report) is False  # its start: checked, nothing to do
    stopped.requested.set()  # the park below records its start and returns at once
    drain._park(None, now[0] + 60, report)
    stopped.requested.clear()
    _kill_own_backend()
    now[0] += parked
    if survives:  # pinged, found dead, renewed: the step runs on a fresh connection
        assert drain._step(report) is False
    else:  # not pinged: the step's first statement fails, before anything is claimed, and ends the drain
        with pytest.raises(DatabaseError):
            drain._step(report)


@pytest.mark.parametrize("listening", [True, False], ids=["listener", "no-listener"])
def test_a_park_that_ends_for_the_presence_record_alone_records_it_and_parks_on_without_a_look(listening):
    """An idle drain records its presence every PRESENCE_IDLE_SECONDS; when nothing else is due, that
    wake-up costs the record alone: no claim, no relay pass, and the park goes on to the moment the
    last look gave (the poll, here) without a look of its own. (Without a listener, on SQLite, it is
    a look as well: there, looks are the only wake-ups.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from pipeline.runtime.drain import DrainReport

    now = [1000.0]

    def ticking() -> float:  # each reading a second later: a park's wait ends without waiting
        now[0] += 1.0
        return now[0]

    from pipeline.runtime import wakeups

    drain = Drain("node:1", max_seconds=600, poll_seconds=60, stop=StopState(), monotonic=ticking)
    report = DrainReport()
    listener = wakeups.Listener(drain.channels) if listening else None
    try:
        assert drain._step(report) is False  # its start: presence recorded, nothing to do
        drain._park(listener, now[0] + 600, report)  # looks (nothing due: the poll), times out at the presence
        with CaptureQueriesContext(connection) as queries:
            assert drain._step(report) is False
            drain._park(listener, now[0] + 600, report)
    finally:
        if listener is not None:
            listener.close()
    statements = [q["sql"] for q in queries]
    claims = [sql for sql in statements if "relayops_claim(" in sql]
    assert any("pipeline_drainpresence" in sql for sql in statements)
    assert len(claims) == (0 if listening else 1), statements  # polling alone, each wake-up is a look
    assert DrainPresence.objects.filter(worker="node:1").exists()
