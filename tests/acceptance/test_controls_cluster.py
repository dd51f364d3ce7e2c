"""Operators acting on a running cluster: a paused tenant's jobs wait while the drains run everyone
else's, and run once the intake resumes; a job cancelled mid-run is abandoned by its worker, without
a result."""

from __future__ import annotations

import pytest

from controls.actors import Actor
from controls.services import cancel_job, pause_intake, resume_intake
from pipeline import queue
from pipeline.invariants import check_all
from pipeline.models import Attempt, Job, OutboxEvent, Result
from tests.acceptance.conftest import effects
from tests.conftest import invoice
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]
OPS = Actor.command("acceptance")


def statuses(jobs: list[Job]) -> set[str]:
    return set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True))


def test_a_paused_tenants_jobs_wait_while_the_drains_run_others_and_run_after_the_resume(start_cluster):
    pause_intake("acme", OPS, reason="upstream sends a bad batch")
    cluster = start_cluster()
    waiting = [queue.enqueue("acme", f"doc-{n}", 1, invoice(n))[0] for n in range(5)]
    others = [queue.enqueue("globex", f"doc-{n}", 1, invoice(n))[0] for n in range(5)]  # behind acme in line

    wait_for(lambda: statuses(others) == {"succeeded"}, timeout=30, what="globex's jobs, queued after acme's, done")
    assert statuses(waiting) == {"queued"}
    assert not Attempt.objects.filter(job__tenant="acme").exists()  # never leased, not even once

    resume_intake("acme", OPS, reason="upstream fixed")
    wait_for(lambda: statuses(waiting) == {"succeeded"} and not OutboxEvent.objects.filter(published_at=None).exists(),
             timeout=30, what="acme's jobs done after the resume")
    assert cluster.stop() == 0
    for job in waiting:
        assert effects(job.idempotency_key) == (1, 1, 1)
    assert check_all().holds


def test_a_job_cancelled_mid_run_is_abandoned_by_its_worker_without_a_result(start_cluster):
    cluster = start_cluster()
    job, _ = queue.enqueue("acme", "slow", 1, invoice(1, work_seconds=4))
    leased = wait_for(lambda: Job.objects.filter(pk=job.pk, status="leased").first(), timeout=15, what="the lease")
    cancel_job(job.pk, OPS, reason="customer withdrew it")
    follower, _ = queue.enqueue("acme", "next", 1, invoice(2))
    wait_for(lambda: Job.objects.filter(pk=follower.pk, status="succeeded").exists(), timeout=30,
             what="the cluster goes on with the next job")
    assert cluster.stop() == 0
    job.refresh_from_db()
    assert (job.status, job.fence) == ("cancelled", leased.fence)
    assert not Result.objects.filter(job=job).exists() and effects(job.idempotency_key) == (0, 0, 0)
    assert Attempt.objects.get(job=job).error_code == "cancelled"
    assert check_all().holds
