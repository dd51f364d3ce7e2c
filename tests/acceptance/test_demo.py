"""Smoke test of the first README command: the demo's setup, and its cluster, on embedded SQLite."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.acceptance.conftest import ROOT

pytestmark = pytest.mark.acceptance


def demo(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY")}
    env.update(DEBUG="1", RELAYOPS_SQLITE_PATH=str(tmp_path / "demo.sqlite3"), LOG_LEVEL="WARNING")
    return subprocess.run([sys.executable, "manage.py", "relayops_demo", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=150)


def test_the_demo_sets_up_on_sqlite_and_its_cluster_finishes_every_job(tmp_path):
    setup = demo(tmp_path, "--setup-only")
    assert setup.returncode == 0, setup.stderr
    assert "SQLite" in setup.stdout
    assert "username: demo-operator" in setup.stdout and "username: demo-auditor" in setup.stdout
    assert setup.stdout.count("queued ") == 12

    run = demo(tmp_path, "--no-serve")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("found  ") == 12  # the second run finds the same jobs
    outcome = dict(line.split()[:2] for line in run.stdout.splitlines() if line.startswith("  ") and "attempts=" in line)
    assert outcome.pop("acme:INV-2001:v1") == "dead_lettered"
    assert outcome.pop("globex:INV-3003:v1") == "cancelled"
    assert set(outcome.values()) == {"succeeded"} and len(outcome) == 10
    assert "every job is terminal" in run.stdout
