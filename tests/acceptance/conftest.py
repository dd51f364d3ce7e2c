"""The real cluster: ``manage.py qcluster`` as a subprocess on the test database, stopped with signals.

Every wait polls the database (or the process) with a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2


def database_url() -> str:
    """The URL of the database this test runs on (pytest-django's test database)."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgresql://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@dataclass
class Cluster:
    """One ``qcluster`` process tree; ``node`` is its RELAYOPS_NODE_NAME (lease owners are node:pid)."""

    node: str
    proc: subprocess.Popen
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Ready once each worker's drain has looked for work (its first beat)."""
        from pipeline.models import DrainPresence

        wait_for(lambda: self.proc.poll() is not None or DrainPresence.objects.filter(node=self.node).count() >= WORKERS,
                 timeout=timeout, what=f"{WORKERS} drains of {self.node}")
        assert self.proc.poll() is None, f"qcluster exited early:\n{self.log()[-3000:]}"

    def signal(self, signum: int = signal.SIGTERM) -> None:
        os.kill(self.pid, signum)  # the main PID only: a group signal can hang django-q2 (#346)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM to the main PID, wait; SIGKILL the whole group if it does not exit in time."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"qcluster {self.node} did not stop within {timeout} s:\n{self.log()[-3000:]}")

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


def cluster_env(node: str, **overrides: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "relayops.settings_test",
        "DATABASE_URL": database_url(),
        "RELAYOPS_NODE_NAME": node,
        "RELAYOPS_Q_WORKERS": str(WORKERS),
        "RELAYOPS_LEASE_SECONDS": "2",
        "RELAYOPS_DRAIN_SECONDS": "8",
        "RELAYOPS_SHUTDOWN_GRACE_SECONDS": "10",
        "RELAYOPS_OUTBOX_CLAIM_SECONDS": "2",
        "LOG_LEVEL": "INFO",
        "DJANGO_Q_LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("RELAYOPS_CRASH_POINTS", None)
    env.update(overrides)
    return env


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Start clusters with ``start_cluster(**env)``; any still running at teardown is SIGKILLed."""
    clusters: list[Cluster] = []

    def start(wait: bool = True, **env: str) -> Cluster:
        node = f"acc-{uuid.uuid4().hex[:8]}"
        log_path = tmp_path / f"{node}.log"
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=cluster_env(node, **env),
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        cluster = Cluster(node, proc, log_path)
        clusters.append(cluster)
        if wait:
            cluster.wait_ready()
        return cluster

    yield start
    for cluster in clusters:
        if cluster.proc.poll() is None:
            cluster.kill()


def effects(key: str) -> tuple[int, int, int]:
    """(results, events, reviews) for an idempotency key: (1, 1, 1) once a job has fully taken effect."""
    from pipeline.models import OutboxEvent, Result, Review

    return (Result.objects.filter(idempotency_key=key).count(),
            OutboxEvent.objects.filter(idempotency_key=key).count(),
            Review.objects.filter(idempotency_key=key).count())
