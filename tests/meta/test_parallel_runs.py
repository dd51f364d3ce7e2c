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
    before = run_databases()
    assert ours in before
    second = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/integration/test_smoke.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert run_databases() == before  # it made its own and dropped it; ours is untouched
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0] == ours
