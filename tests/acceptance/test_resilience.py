"""A real node under fire: one SIGKILLed process never leaves it unable to take jobs, it takes jobs
again within seconds of a database outage, and relayops_health tells a wedged node from an idle one.

Every figure is measured from the outside: the test enqueues a job and polls the database, with a
deadline, until the node committed it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from pipeline import queue
from pipeline.models import DrainPresence, Job
from pipeline.runtime import liveness
from tests.acceptance.conftest import ROOT, Cluster, cluster_env, effects
from tests.conftest import invoice
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

DRAIN_SECONDS = 3  # short hand-overs, so a wedge that starts at one shows within the probe window
RECOVERY_SECONDS = 5.0  # "a few seconds": the most a probe job may wait for the node


def worker_pids(cluster: Cluster) -> set[int]:
    """The live worker processes of ``cluster`` (each drain records ``node:pid``)."""
    workers = DrainPresence.objects.filter(node=cluster.node).values_list("worker", flat=True)
    return {pid for pid in (int(w.rsplit(":", 1)[1]) for w in workers) if _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def logged_pid(cluster: Cluster, what: str) -> int:
    """The pid django-q2 logged for its pusher ("pushing tasks at") or monitor ("monitoring at")."""
    found = wait_for(lambda: re.findall(rf"{what} at (\d+)", cluster.log()), timeout=10, what=what)
    return int(found[-1])


def reading_the_task_queue(pids: set[int]) -> int | None:
    """A worker blocked reading django-q2's shared task queue (a pipe), if any is right now."""
    for pid in pids:
        try:
            if "pipe_read" in Path(f"/proc/{pid}/wchan").read_text():
                return pid
        except FileNotFoundError:
            continue
    return None


def commit_latency(tag: str) -> float:
    """Enqueue one job and return the seconds until it succeeded (fails past the deadline)."""
    job, _ = queue.enqueue("acme", f"probe-{tag}", 1, invoice(len(tag)))
    began = time.monotonic()
    wait_for(lambda: Job.objects.filter(pk=job.pk, status="succeeded").exists(), timeout=RECOVERY_SECONDS,
             what=f"probe job {tag} committed within {RECOVERY_SECONDS} s", interval=0.02)
    return time.monotonic() - began


def probe(seconds: float) -> list[float]:
    """Probe jobs back to back for ``seconds`` (covering several drain hand-overs): their latencies."""
    end, latencies = time.monotonic() + seconds, []
    while time.monotonic() < end or len(latencies) < 3:
        latencies.append(commit_latency(f"{len(latencies)}-{time.monotonic_ns()}"))
    return latencies


def kill_idle_worker(cluster: Cluster) -> int:
    """SIGKILL a worker holding no lease, preferring one caught blocked on django-q2's task queue: the
    moment that used to wedge a node (looked for through a few drain hand-overs)."""
    pids = worker_pids(cluster)
    end = time.monotonic() + 2 * DRAIN_SECONDS
    victim = None
    while victim is None and time.monotonic() < end:
        victim = reading_the_task_queue(pids)
    busy = {int(o.rsplit(":", 1)[1]) for o in Job.objects.filter(status="leased").values_list("lease_owner", flat=True)}
    victim = victim or min(pids - busy)
    os.kill(victim, signal.SIGKILL)
    return victim


def kill_busy_worker(cluster: Cluster) -> int:
    job, _ = queue.enqueue("acme", "long", 1, invoice(999, work_seconds=3))
    leased = wait_for(lambda: Job.objects.filter(pk=job.pk, status="leased").first(), timeout=10, what="the lease")
    victim = int(leased.lease_owner.rsplit(":", 1)[1])
    os.kill(victim, signal.SIGKILL)
    return victim


KILLS = {
    "idle_worker": kill_idle_worker,
    "busy_worker": kill_busy_worker,
    "pusher": lambda cluster: _kill(logged_pid(cluster, "pushing tasks")),
    "monitor": lambda cluster: _kill(logged_pid(cluster, "monitoring")),
}


def _kill(pid: int) -> int:
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.parametrize("kind", list(KILLS))
def test_one_sigkilled_process_never_leaves_the_node_unable_to_take_jobs(start_cluster, kind):
    cluster = start_cluster(RELAYOPS_DRAIN_SECONDS=str(DRAIN_SECONDS))
    victim = KILLS[kind](cluster)
    assert victim not in (cluster.pid,)

    latencies = probe(2 * DRAIN_SECONDS + 2)
    assert max(latencies) < RECOVERY_SECONDS, latencies
    if kind.endswith("worker"):  # the sentinel replaced it, and the new worker hosts a drain at once
        wait_for(lambda: len(worker_pids(cluster) - {victim}) == 2, timeout=RECOVERY_SECONDS, what="a new worker")
    if kind == "busy_worker":  # the killed job runs again: its crash counted as a lease expiry
        wait_for(lambda: Job.objects.filter(document_id="long", status="succeeded").exists(), timeout=20,
                 what="the killed job taken over")
        long = Job.objects.get(document_id="long")
        assert (long.attempt, long.lease_expiries) == (1, 1) and effects(long.idempotency_key)[:2] == (1, 1)
    began = time.monotonic()
    assert cluster.stop(timeout=30) == 0  # and a graceful stop still finishes
    assert time.monotonic() - began < 15


def test_every_node_takes_jobs_again_within_seconds_of_the_database_coming_back(start_cluster, proxy):
    s = connection.settings_dict
    via_proxy = f"postgresql://{s['USER']}@127.0.0.1:{proxy.port}/{s['NAME']}"
    nodes = [start_cluster(DATABASE_URL=via_proxy, RELAYOPS_DRAIN_SECONDS=str(DRAIN_SECONDS)) for _ in range(2)]

    proxy.stop()  # the database refuses every node's connections and drops those open
    job, _ = queue.enqueue("acme", "during-the-outage", 1, invoice(1))  # this test's own connection is direct
    wait_for(lambda: all(n.log().count("drain.failed") >= 2 for n in nodes), timeout=20,
             what="every node noticing the outage")
    assert Job.objects.get(pk=job.pk).status == "queued"

    proxy.start()
    back = time.monotonic()
    back_at = timezone.now()
    wait_for(lambda: Job.objects.filter(pk=job.pk, status="succeeded").exists(), timeout=RECOVERY_SECONDS,
             what="the job committed within 5 s of the database coming back", interval=0.02)
    wait_for(lambda: all(DrainPresence.objects.filter(node=n.node, seen_at__gt=back_at).count() == 2 for n in nodes),
             timeout=max(RECOVERY_SECONDS - (time.monotonic() - back), 0.1),
             what="every drain of every node back within 5 s")
    for node in nodes:
        assert node.stop() == 0
    assert effects(job.idempotency_key)[:2] == (1, 1)


def assess(node: str) -> liveness.Health:
    from django.conf import settings

    return liveness.assess(timezone.now(), node=node, stale_seconds=settings.RELAYOPS["HEALTH_STALE_SECONDS"])


def test_health_flags_a_wedged_node_within_30_s_and_never_an_idle_one(start_cluster):
    cluster = start_cluster()
    idle_until = time.monotonic() + 12  # several presence intervals, and a drain hand-over or two
    verdicts = []
    while time.monotonic() < idle_until:
        verdicts.append(assess(cluster.node))
        time.sleep(0.25)  # the probe's own pace: an operator's health timer
    assert all(v.healthy for v in verdicts), [v.reason for v in verdicts if not v.healthy]

    workers = worker_pids(cluster)
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)  # wedged: alive, holding nothing, doing nothing
    try:
        stopped = time.monotonic()
        queue.enqueue("acme", "due", 1, invoice(1))
        wait_for(lambda: not assess(cluster.node).healthy, timeout=30, what="relayops_health to flag the wedge")
        flagged_after = time.monotonic() - stopped
        probe_cmd = subprocess.run([sys.executable, "manage.py", "relayops_health", "--node", cluster.node],
                                   cwd=ROOT, env=cluster_env(cluster.node), capture_output=True, text=True, timeout=60)
        assert probe_cmd.returncode == 1 and "unhealthy" in probe_cmd.stderr
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    assert flagged_after < 30
    assert cluster.stop() == 0
