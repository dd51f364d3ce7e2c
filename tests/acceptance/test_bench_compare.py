"""``./run bench compare --smoke`` (what CI runs): pgbench, real drains and latency in one short run.

Only that it completes and reports every section with numbers: its figures depend on the machine and
its load, so no timing is asserted.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import uuid

import psycopg
import pytest

from tests.acceptance.conftest import ROOT, database_url

pytestmark = [pytest.mark.acceptance]


def numbers(value: object) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [n for item in value.values() for n in numbers(item)]
    if isinstance(value, list):
        return [n for item in value for n in numbers(item)]
    return []


def test_the_smoke_comparison_completes_and_reports_every_section(tmp_path):
    db = f"relayops_bench_compare_ci_{uuid.uuid4().hex[:8]}"
    out = tmp_path / "compare.json"
    env = {**os.environ, "DATABASE_URL": database_url()}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    try:
        run = subprocess.run([sys.executable, "bench/compare.py", "--smoke", "--db", db, "--json", str(out)],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        server = database_url().rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())

    pgbench = result["pgbench"]
    assert [r["clients"] for r in pgbench["runs"]] == [1, 2]
    assert all(r["jobs_per_s"] > 0 and r["jobs"] > 0 for r in pgbench["runs"])
    assert all(r["succeeded_rows"] >= r["jobs"] for r in pgbench["runs"])  # each script run completed a job
    assert pgbench["statements"]["claim"] >= 1 and pgbench["statements"]["commit"] >= 1
    assert r"\gset" in pgbench["script"]
    assert pgbench["limit_jobs_per_s"] > 0

    (drain,) = result["relayops"]
    assert drain["workers"] == 2 and drain["jobs"] > 0 and drain["jobs_per_s"] > 0
    assert set(drain["cpu_ms_per_job"]) == {"workers", "postgres", "total"}
    assert drain["cpu_ms_per_job"]["workers"] > 0
    assert drain["statements_per_job"] > 0 and drain["commits_per_job"] > 0
    assert [p for p in drain["processes"] if p["role"] == "worker" and p["rss_mb"] > 0]

    (latency,) = result["latency"]
    for figure in ("start_ms", "publish_ms"):
        assert set(latency[figure]) == {"median", "p95", "max"}
        assert all(value >= 0 for value in latency[figure].values())

    assert result["one_at_a_time"]["jobs"] == 5 and result["one_at_a_time"]["statements_per_job"] > 0

    assert result["machine"]["cores"] >= 1 and result["machine"]["postgresql"]
    assert len(result["table"]) >= 7
    assert all(math.isfinite(n) for n in numbers(result))
    assert "RelayOps drain, 2 worker(s)" in run.stdout
