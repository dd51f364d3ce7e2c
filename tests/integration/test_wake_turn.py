"""One claim at a time on a host for the drains a jobs doorbell woke (pipeline.runtime.wake_turn):
real listeners, real NOTIFYs, two drains sharing one turn file."""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pipeline import queue
from pipeline.extraction.rules import invoice_extractor
from pipeline.models import Job
from pipeline.runtime import wakeups
from pipeline.runtime.drain import Drain, DrainReport
from pipeline.runtime.shutdown import StopState
from pipeline.runtime.wake_turn import WakeTurn
from tests.conftest import invoice

pytestmark = pytest.mark.django_db(transaction=True)


def _claims(queries) -> int:
    return sum("relayops_claim(" in q["sql"] for q in queries)


@pytest.fixture
def woken(tmp_path):
    """Two parked drains of one host, each with its own listener; ``wake()`` parks both until the
    doorbell rings (it has rung). A park ends within 20 ms for a job that is due already, and on a busy
    machine the NOTIFY may reach a listener later than that: such a drain parks again, as a drain
    whose look found the job taken would, until the doorbell wakes it."""
    listeners = [wakeups.Listener([wakeups.JOBS, wakeups.OUTBOX]) for _ in range(2)]
    drains = [Drain(f"node:{n}", max_seconds=60, poll_seconds=60, stop=StopState(),
                    wake_turn=WakeTurn(tmp_path / "turn")) for n in range(2)]
    report = DrainReport()

    def wake() -> list[Drain]:
        for drain, listener in zip(drains, listeners):
            deadline = time.monotonic() + 10
            drain._woken = None
            while not drain._woken and time.monotonic() < deadline:
                drain._park(listener, drain.monotonic() + 10, report)
            assert drain._woken == {wakeups.JOBS}
        return drains

    yield wake, report
    for listener in listeners:
        listener.close()


def test_of_two_drains_one_doorbell_woke_only_one_claims(woken):
    wake, report = woken
    job, _ = queue.enqueue("acme", "one", 1, invoice(1))
    first, second = wake()
    assert first._step(report) is False  # it ran the job; its claim saw no other waiting
    with CaptureQueriesContext(connection) as queries:
        assert second._step(report) is False
    assert _claims(queries) == 0  # it knows the claim after its wake-up left nothing: no statement
    assert second._lost_race  # it parks again, and looks within a quarter second all the same
    job.refresh_from_db()
    assert (job.status, job.lease_owner) == ("succeeded", "node:0")


def test_a_burst_is_shared_the_second_drain_claims_what_the_first_claim_saw_waiting(woken):
    """While the first drain runs the job it claimed, the second claims the one that claim saw waiting (so
    the first's commit finds nothing more to claim with it)."""
    wake, report = woken
    jobs = [queue.enqueue("acme", f"burst-{n}", 1, invoice(n))[0] for n in range(2)]
    first, second = wake()
    second_claims: list[int] = []

    def first_job(document: Any, checkpoint: Any) -> dict[str, Any]:  # the second drain's step, meanwhile
        with CaptureQueriesContext(connection) as queries:
            second._step(report)
        second_claims.append(_claims(queries))
        return invoice_extractor(document, checkpoint)

    first._job_work = functools.partial(first._job_work, extractor=first_job)
    with CaptureQueriesContext(connection) as queries:
        first._step(report)
    assert second_claims == [1]  # the first claim saw another job waiting: the second drain takes it
    assert _claims(queries) == 2  # the first's own and, during its job on the same connection, the second's
    assert dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("document_id", "lease_owner")) == {
        "burst-0": "node:0", "burst-1": "node:1"}


def test_a_drain_woken_by_a_transaction_the_last_claim_did_not_see_claims_as_before(woken):
    """The record is of a claim whose snapshot did not see the transaction that rang: it may have missed its job."""
    wake, report = woken
    queue.enqueue("acme", "early", 1, invoice(1))
    first, second = wake()
    first._step(report)  # claims "early" and records its claim
    job, _ = queue.enqueue("acme", "late", 1, invoice(2))
    first, second = wake()  # both woken again, after that claim
    with CaptureQueriesContext(connection) as queries:
        second._step(report)
    assert _claims(queries) == 1
    job.refresh_from_db()
    assert job.lease_owner == "node:1"


def test_without_a_turn_file_every_woken_drain_claims(tmp_path):
    turn = WakeTurn(tmp_path / "missing-dir" / "turn")
    assert not turn.available
    turn.give_back("5:9:", False, claimed=True)  # harmless
    turn.close()
