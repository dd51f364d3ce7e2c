"""The cluster runs everything: every job ends terminal with exactly one effect, on one node or two,
and a worker SIGKILLed mid-job costs time, not a job or a duplicate."""

from __future__ import annotations

import datetime as dt
import os
import signal

import pytest

from pipeline.models import DeadLetter
from pipeline import queue
from pipeline.clock import FrozenClock
from pipeline.models import Attempt, Job, OutboxEvent
from pipeline.states import TERMINAL_STATUSES
from tests.acceptance.conftest import effects
from tests.conftest import invoice
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def all_terminal(jobs: list[Job]) -> bool:
    return Job.objects.filter(pk__in=[j.pk for j in jobs]).exclude(status__in=TERMINAL_STATUSES).count() == 0


def all_published() -> bool:
    return not OutboxEvent.objects.filter(published_at__isnull=True).exists()


def test_a_mixed_workload_ends_terminal_with_one_effect_per_key(start_cluster):
    cluster = start_cluster()
    clean = [queue.enqueue("acme", f"doc-{n}", 1, invoice(n))[0] for n in range(12)]
    shared = [queue.enqueue(tenant, "shared-7", 1, invoice(7))[0] for tenant in ("globex", "initech")]
    flaky, _ = queue.enqueue("acme", "flaky", 1, invoice(90, transient_failures=1))
    broken, _ = queue.enqueue("acme", "broken", 1, {"text": "not an invoice"})
    a_minute_ago = FrozenClock(dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1))
    late, _ = queue.enqueue("acme", "late", 1, invoice(91), deadline=dt.timedelta(seconds=1), clock=a_minute_ago)
    jobs = [*clean, *shared, flaky, broken, late]

    wait_for(lambda: all_terminal(jobs) and all_published(), timeout=30, what="every job terminal and published")
    assert cluster.stop() == 0

    statuses = {j.document_id: j.status for j in Job.objects.filter(pk__in=[j.pk for j in jobs])}
    assert statuses.pop("broken") == "dead_lettered"
    assert statuses.pop("late") == "cancelled"
    assert set(statuses.values()) == {"succeeded"}
    assert DeadLetter.objects.get(job=broken).reason_code == "permanent_error"
    flaky.refresh_from_db()
    assert flaky.attempt == 2
    for job in [*clean, *shared, flaky]:
        assert effects(job.idempotency_key) == (1, 1, 1), job.idempotency_key
    for job in (broken, late):
        assert effects(job.idempotency_key) == (0, 0, 0)


def test_a_worker_killed_mid_job_is_replaced_and_the_job_takes_effect_once(start_cluster):
    cluster = start_cluster()
    job, _ = queue.enqueue("acme", "slow", 1, invoice(1, work_seconds=2))
    leased = wait_for(lambda: Job.objects.filter(pk=job.pk, status="leased").first(), timeout=10, what="the lease")
    pid = int(leased.lease_owner.rsplit(":", 1)[1])
    assert pid != cluster.pid
    os.kill(pid, signal.SIGKILL)

    wait_for(lambda: Job.objects.filter(pk=job.pk, status="succeeded").exists() and all_published(),
             timeout=30, what="the job to finish on another worker")
    assert cluster.stop() == 0
    job.refresh_from_db()
    assert (job.fence, job.attempt, job.lease_expiries) == (2, 1, 1)  # the crash is no attempt of the job
    first, second = Attempt.objects.filter(job=job).order_by("fence")
    assert first.worker == leased.lease_owner and first.error_code == "lease_expired"
    assert second.worker != first.worker
    assert effects(job.idempotency_key) == (1, 1, 1)
    assert "reincarnated worker" in cluster.log()


def test_two_clusters_share_one_database_without_duplicates(start_cluster):
    one, two = start_cluster(), start_cluster()
    jobs = [queue.enqueue("acme", f"doc-{n}", 1, invoice(n, work_seconds=0.2))[0] for n in range(30)]

    wait_for(lambda: all_terminal(jobs) and all_published(), timeout=40, what="every job done by two clusters")
    assert one.stop() == 0 and two.stop() == 0

    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True)) == {"succeeded"}
    nodes = {worker.rsplit(":", 1)[0] for worker in Attempt.objects.values_list("worker", flat=True)}
    assert nodes == {one.node, two.node}
    for job in jobs:
        assert effects(job.idempotency_key) == (1, 1, 1)
