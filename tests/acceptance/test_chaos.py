"""The short chaos run: real nodes under crash points, SIGKILLs, killed connections and database
outages end with nothing lost, nothing doubled, no valid document failed and every invariant holding
(bench/chaos.py; the long run is one command in docs/guarantees.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.conf import settings

from tests.acceptance.conftest import ROOT

pytestmark = pytest.mark.acceptance


def test_a_short_chaos_run_loses_nothing_and_doubles_nothing():
    db = f"{settings.TEST_DATABASE_PREFIX}{os.getpid()}_chaos"  # dropped by chaos, or by the next run if killed
    s = settings.DATABASES["default"]
    server = f"postgresql://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/postgres"
    env = {**os.environ, "DATABASE_URL": server}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "bench/chaos.py", "--nodes", "2", "--jobs", "120", "--seconds", "25", "--seed", "7",
         "--db", db], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    table = result.stdout
    assert result.returncode == 0, table + result.stderr[-3000:]
    for must_be_zero in ("duplicates that got through", "lost jobs", "valid documents not succeeded"):
        assert re.search(rf"^{must_be_zero} \(must be 0\)\s+0$", table, re.M), table
    assert re.search(r"^check_invariants\s+holds", table, re.M) and "verdict: PASS" in table
    assert re.search(r"^faults injected\s+\w+ \d", table, re.M), table
