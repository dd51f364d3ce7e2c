"""Two test runs on one PostgreSQL server at once: each has its own database, and each drops it after."""

from __future__ import annotations

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
def test_a_second_run_beside_this_one_passes_on_its_own_database():
    ours = connection.settings_dict["NAME"]
    assert ours in run_databases()
    second = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/integration/test_smoke.py"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, out[-3000:] + err[-3000:]
    # It made its own and dropped it; ours is untouched. (Runs of other checkouts on this host may
    # come and go meanwhile: only this pair is looked at.)
    left = run_databases()
    assert ours in left
    assert not {name for name in left if name.startswith(f"{settings.TEST_DATABASE_PREFIX}{second.pid}_")}
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0] == ours
