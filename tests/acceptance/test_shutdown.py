"""Graceful shutdown: SIGTERM lets running jobs finish within the grace period, then gives the rest
back without counting an attempt; a second signal stops at once."""

from __future__ import annotations

import os
import signal
import time

import pytest

from pipeline import queue
from pipeline.models import Attempt, Job
from tests.acceptance.conftest import effects
from tests.conftest import invoice
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def leased(*jobs: Job) -> bool:
    return Job.objects.filter(pk__in=[j.pk for j in jobs], status="leased").count() == len(jobs)


GRACE = 10  # far longer than the short job, far shorter than the long one: no race with a loaded machine


def test_sigterm_finishes_short_jobs_and_releases_long_ones_without_an_attempt(start_cluster):
    cluster = start_cluster(RELAYOPS_SHUTDOWN_GRACE_SECONDS=str(GRACE))
    short, _ = queue.enqueue("acme", "short", 1, invoice(1, work_seconds=1))
    long, _ = queue.enqueue("acme", "long", 1, invoice(2, work_seconds=60))
    wait_for(lambda: leased(short, long), timeout=10, what="both jobs leased")

    began = time.monotonic()
    assert cluster.stop(timeout=GRACE + 20) == 0
    assert time.monotonic() - began < GRACE + 8

    short.refresh_from_db()
    long.refresh_from_db()
    assert short.status == "succeeded" and effects(short.idempotency_key)[0] == 1
    assert (long.status, long.attempt, long.fence) == ("queued", 0, 1)
    assert Attempt.objects.get(job=long).error_code == "shutdown"
    assert effects(long.idempotency_key) == (0, 0, 0)


def test_the_released_job_runs_on_the_next_cluster(start_cluster):
    first = start_cluster(RELAYOPS_SHUTDOWN_GRACE_SECONDS="1")
    job, _ = queue.enqueue("acme", "moved", 1, invoice(3, work_seconds=3))
    wait_for(lambda: leased(job), timeout=10, what="the lease")
    assert first.stop() == 0
    assert Job.objects.get(pk=job.pk).status == "queued"

    second = start_cluster()
    wait_for(lambda: Job.objects.filter(pk=job.pk, status="succeeded").exists(), timeout=20, what="the rerun")
    assert second.stop() == 0
    assert Job.objects.get(pk=job.pk).attempt == 1  # the released attempt was not counted
    assert effects(job.idempotency_key)[:2] == (1, 1)


def test_a_second_signal_stops_at_once(start_cluster):
    cluster = start_cluster(RELAYOPS_SHUTDOWN_GRACE_SECONDS="120")
    job, _ = queue.enqueue("acme", "long", 1, invoice(4, work_seconds=60))
    wait_for(lambda: leased(job), timeout=10, what="the lease")

    cluster.signal(signal.SIGTERM)
    wait_for(lambda: "worker.stop_requested" in cluster.log(), timeout=10, what="the workers told to stop")
    began = time.monotonic()
    cluster.signal(signal.SIGINT)
    assert cluster.stop(timeout=15) == 0
    assert time.monotonic() - began < 10

    job.refresh_from_db()
    assert (job.status, job.attempt) == ("queued", 0)
    assert "cluster.stop_now" in cluster.log()


def test_a_sigterm_to_the_whole_process_group_does_not_hang(start_cluster):
    """systemd's default KillMode or `timeout` signal every process: django-q2 alone would hang (#346)."""
    cluster = start_cluster()
    job, _ = queue.enqueue("acme", "cut", 1, invoice(5, work_seconds=30))
    wait_for(lambda: leased(job), timeout=10, what="the lease")

    os.killpg(cluster.pid, signal.SIGTERM)
    assert cluster.proc.wait(15) == 0
    assert "cluster.workers_killed_by_group_signal" in cluster.log()

    Job.objects.filter(pk=job.pk).update(payload=invoice(5))  # test shortcut: make the rerun quick
    replacement = start_cluster()  # the killed worker's lease expires; the job runs again, once
    wait_for(lambda: Job.objects.filter(pk=job.pk, status="succeeded").exists(), timeout=20, what="the rerun")
    assert replacement.stop() == 0
    assert effects(job.idempotency_key)[:2] == (1, 1)
