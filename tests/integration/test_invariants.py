"""``check_invariants`` passes on what the pipeline writes and catches each kind of broken row."""

from __future__ import annotations

import datetime as dt
from io import StringIO
from typing import Callable

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from pipeline import queue
from pipeline.models import Attempt, ConsumedEvent, DeadLetter, Job, OutboxEvent, Result, Review
from pipeline.relay import publish_pending
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("check_invariants", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def pipeline_history(clock) -> dict[str, Job]:
    """A small history of every outcome, as the pipeline writes it (one event left unpublished)."""
    jobs = {
        "done": queue.enqueue("acme", "done", 1, invoice(1), clock=clock)[0],
        "shared": queue.enqueue("globex", "done", 1, invoice(1), clock=clock)[0],  # same document id
        "broken": queue.enqueue("acme", "broken", 1, {"text": "no invoice"}, clock=clock)[0],
        "flaky": queue.enqueue("acme", "flaky", 1, invoice(2, transient_failures=1), clock=clock)[0],
    }
    while process_once("w1", clock=clock).outcome != "idle":
        clock.advance(5)
    publish_pending(clock=clock)
    jobs["unpublished"] = queue.enqueue("acme", "late", 1, invoice(3), clock=clock)[0]
    process_once("w1", clock=clock)
    jobs["queued"] = queue.enqueue("initech", "waiting", 1, invoice(4), clock=clock)[0]
    jobs["leased"] = queue.enqueue("initech", "running", 1, invoice(5), clock=clock)[0]
    queue.lease_next("w2", clock=clock)
    return {name: Job.objects.get(pk=job.pk) for name, job in jobs.items()}


def test_what_the_pipeline_writes_holds_every_invariant(pipeline_history):
    code, report = run()
    assert code == 0, report
    assert "over 7 jobs" in report and "verdict: every invariant holds" in report
    assert pipeline_history["flaky"].status == "succeeded" and pipeline_history["broken"].status == "dead_lettered"


def key(jobs: dict[str, Job], name: str) -> str:
    return jobs[name].idempotency_key


BREAKS: dict[str, Callable[[dict[str, Job]], object]] = {
    "succeeded_has_its_result": lambda j: Result.objects.filter(idempotency_key=key(j, "done")).delete(),
    "result_only_for_success": lambda j: Result.objects.filter(idempotency_key=key(j, "done")).update(fence=7),
    "succeeded_has_its_event": lambda j: (OutboxEvent.objects.filter(idempotency_key=key(j, "unpublished")).delete()),
    "event_only_for_success": lambda j: OutboxEvent.objects.create(
        tenant="acme", topic="extraction.completed", idempotency_key=key(j, "broken"), payload={},
        created_at=j["broken"].created_at),
    "published_event_consumed_once": lambda j: ConsumedEvent.objects.all().delete(),
    "review_only_for_success": lambda j: Review.objects.filter(idempotency_key=key(j, "done")).update(
        job=j["broken"]),
    "fences_contiguous": lambda j: Attempt.objects.filter(job=j["flaky"], fence=1).delete(),
    "attempts_closed": lambda j: Attempt.objects.filter(job=j["done"]).update(ended_at=None),
    "dead_letters_closed_codes": lambda j: DeadLetter.objects.update(error_code="KeyError: 'total'"),
    "jobs_live_or_terminal": lambda j: None,  # the table's check constraints refuse it: dropped in the test
}


@pytest.mark.parametrize("check", sorted(BREAKS))
def test_each_broken_invariant_is_named_and_fails_the_run(pipeline_history, check):
    if check == "jobs_live_or_terminal":  # the database refuses most broken job rows: drop the constraints
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE pipeline_job DROP CONSTRAINT job_lease_expiries_le_max")
            cursor.execute("UPDATE pipeline_job SET lease_expiries = max_lease_expiries + 1 WHERE id = %s",
                           [pipeline_history["queued"].pk])
    else:
        BREAKS[check](pipeline_history)
    code, report = run()
    assert code == 1
    failed = [line.split()[1] for line in report.splitlines() if line.strip().startswith("FAIL")]
    assert check in failed and len(failed) <= 2, report  # a wrong fence also leaves the job without its result
    assert "verdict: BROKEN" in report


def test_scope_by_tenant_and_time(pipeline_history, clock):
    Result.objects.filter(idempotency_key=key(pipeline_history, "shared")).delete()  # globex's
    assert run("--tenant", "acme")[0] == 0
    assert run("--tenant", "globex")[0] == 1
    future = (clock.now() + dt.timedelta(days=1)).date().isoformat()
    code, report = run("--since", future)
    assert code == 0 and "over 0 jobs" in report
    assert run("--since", "3650d")[0] == 1


@pytest.mark.parametrize("args", [["--tenant", "Not A Tenant"], ["--since", "yesterday"], ["--timeout", "0"]])
def test_bad_options_are_refused_before_anything_runs(args):
    with pytest.raises(CommandError):
        call_command("check_invariants", *args, stdout=StringIO())
