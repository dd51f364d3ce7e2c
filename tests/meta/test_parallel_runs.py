"""Two test runs on one PostgreSQL server at once: each has its own database, and each drops it after."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def run_databases() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)",
                       [settings.TEST_DATABASE_PREFIX])
        return {name for (name,) in cursor.fetchall()}


@pytest.mark.django_db
def test_a_second_run_beside_this_one_passes_on_its_own_database(tmp_path):
    ours = connection.settings_dict["NAME"]
    assert ours in run_databases()
    out = tmp_path / "second-run-database"
    second = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/meta/probe_run.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "RELAYOPS_PROBE_OUT": str(out)},
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    theirs = out.read_text()
    assert theirs.startswith(settings.TEST_DATABASE_PREFIX) and theirs != ours
    databases = run_databases()
    assert ours in databases and theirs not in databases  # it dropped its own; ours is untouched
