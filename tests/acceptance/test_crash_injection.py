"""RELAYOPS_CRASH_POINTS in real processes: workers SIGKILL themselves at the named points, and every
job still ends with exactly one result, one event and one review."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db.models import F

from pipeline import queue
from pipeline.models import Job, OutboxEvent
from tests.acceptance.conftest import ROOT, cluster_env, effects
from tests.conftest import invoice
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

POINTS = "after_extract:0.2,after_commit_before_ack:0.2,after_publish_before_mark:0.2"


# The default publishers hand each event to review in its commit; a publisher that does not say which
# events it wants sends every event through the relay, its claim, publication and mark.
PATHS = {"handed-off-in-commit": {}, "through-the-relay": {
    "RELAYOPS_PUBLISHERS": "review-handoff,tests.integration.plugins.RecordingPublisher"}}


@pytest.mark.parametrize("path", list(PATHS))
def test_killed_workers_cost_time_never_a_duplicate(start_cluster, path):
    cluster = start_cluster(DEBUG="1", RELAYOPS_CRASH_POINTS=POINTS, **PATHS[path])
    jobs = [queue.enqueue("acme", f"doc-{n}", 1, invoice(n), max_attempts=20)[0] for n in range(15)]

    def done() -> bool:
        finished = Job.objects.filter(pk__in=[j.pk for j in jobs], status="succeeded").count() == len(jobs)
        return finished and not OutboxEvent.objects.filter(published_at__isnull=True).exists()

    wait_for(done, timeout=60, what="every job done despite the crashes")
    assert cluster.stop() == 0
    for job in jobs:
        assert effects(job.idempotency_key) == (1, 1, 1)
    in_commit = OutboxEvent.objects.filter(published_at=F("created_at")).count()  # published as it was written
    assert in_commit == len(jobs) if path == "handed-off-in-commit" else in_commit == 0
    log = cluster.log()
    assert "CRASH INJECTION ENABLED" in log
    assert "reincarnated worker" in log


def test_crash_points_are_refused_without_debug():
    env = cluster_env("refused", RELAYOPS_CRASH_POINTS=POINTS, DEBUG="0")
    env.pop("RELAYOPS_CRASH_POINTS_FORCE", None)
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0
    assert "RELAYOPS_CRASH_POINTS_FORCE" in result.stderr
