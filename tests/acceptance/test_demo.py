"""Smoke test of the first README command: the demo's setup through the front door, its cluster, and
its server with the printed curl line, on embedded SQLite."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.acceptance.conftest import ROOT
from tests.integration.fake_llm import fake_llm  # noqa: F401  (fixture)

pytestmark = pytest.mark.acceptance


def demo_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY") and not k.startswith("RELAYOPS_")}
    env.update(DEBUG="1", RELAYOPS_SQLITE_PATH=str(tmp_path / "demo.sqlite3"), LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
    return env


def demo(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", "relayops_demo", *args], cwd=ROOT, env=demo_env(tmp_path),
                          capture_output=True, text=True, timeout=150)


def test_the_demo_sets_up_on_sqlite_and_its_cluster_finishes_every_job(tmp_path):
    setup = demo(tmp_path, "--setup-only")
    assert setup.returncode == 0, setup.stderr
    assert "SQLite" in setup.stdout and "extractor: rules" in setup.stdout
    assert "username: demo-operator" in setup.stdout and "username: demo-auditor" in setup.stdout
    assert "API keys made: acme, globex" in setup.stdout
    assert setup.stdout.count("queued ") == 13
    assert setup.stdout.count("HTTP 201") == 10  # through the front door
    assert setup.stdout.count("in-process") == 3  # the simulated flaky model

    run = demo(tmp_path, "--no-serve")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("found  ") == 13 and run.stdout.count("HTTP 200") == 10  # the second run finds the same jobs
    outcome = dict(line.split()[:2] for line in run.stdout.splitlines() if line.startswith("  ") and "attempts=" in line)
    assert outcome.pop("acme:INV-2001:v1") == "dead_lettered"  # a broken rule
    assert outcome.pop("acme:INV-2003:v1") == "dead_lettered"  # malformed
    assert outcome.pop("globex:INV-3003:v1") == "cancelled"
    assert set(outcome.values()) == {"succeeded"} and len(outcome) == 10
    assert "every job is terminal" in run.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_demo_server_prints_a_curl_line_that_ingests_one_more(tmp_path):
    port = free_port()
    out_path = tmp_path / "demo.out"
    with out_path.open("w") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "relayops_demo", "--port", str(port)], cwd=ROOT,
                                env=demo_env(tmp_path), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Press Ctrl-C" not in out_path.read_text():
            assert proc.poll() is None, out_path.read_text()
            assert time.monotonic() < deadline, out_path.read_text()
            time.sleep(0.2)
        printed = out_path.read_text()
        [curl] = [line.strip() for line in printed.splitlines() if line.strip().startswith("curl ")]
        assert f"http://127.0.0.1:{port}/api/v1/documents" in curl
        first = json.loads(subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30).stdout)
        again = json.loads(subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30).stdout)
        assert first["idempotency_key"] == "acme:INV-1099:v1" and first["created"] is True
        assert again == {**first, "created": False, "status": again["status"]}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert proc.returncode == 0 and "stopped cleanly" in out_path.read_text()


def test_with_a_model_url_the_demo_runs_the_llm_extractor(tmp_path, fake_llm):
    from werkzeug import Request, Response

    from pipeline.errors import PermanentError
    from pipeline.extraction.rules import read_invoice
    from tests.integration.fake_llm import MODEL, PATH, completion

    def model(request: Request) -> Response:  # reads like the rules extractor; refuses what is no invoice
        text = json.loads(request.data)["messages"][1]["content"].split("\n\n", 1)[1]
        try:
            answer = completion(json.dumps(read_invoice(text)))
        except PermanentError:
            answer = completion(None, refusal="This is not an invoice.")
        return Response(json.dumps(answer), content_type="application/json")

    fake_llm.server.expect_request(PATH, method="POST").respond_with_handler(model)
    env = {**demo_env(tmp_path), "RELAYOPS_LLM_BASE_URL": fake_llm.url(), "RELAYOPS_LLM_MODEL": MODEL}
    run = subprocess.run([sys.executable, "manage.py", "relayops_demo", "--no-serve"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"extractor: llm ({MODEL} at {fake_llm.url()})" in run.stdout
    assert "in-process" not in run.stdout  # the simulated flaky model is the rules extractor's
    outcome = dict(line.split()[:2] for line in run.stdout.splitlines() if line.startswith("  ") and "attempts=" in line)
    assert outcome.pop("acme:INV-2001:v1") == "dead_lettered" and outcome.pop("acme:INV-2003:v1") == "dead_lettered"
    assert set(outcome.values()) == {"succeeded"} and len(outcome) == 8
    import sqlite3

    with sqlite3.connect(tmp_path / "demo.sqlite3") as db:
        rows = db.execute("SELECT DISTINCT extractor, model_name FROM pipeline_attempt").fetchall()
        codes = db.execute("SELECT j.idempotency_key, d.error_code FROM pipeline_deadletter d "
                           "JOIN pipeline_job j ON j.id = d.job_id ORDER BY j.idempotency_key").fetchall()
    assert rows == [("llm", MODEL)]
    assert codes == [("acme:INV-2001:v1", "validation_failed"), ("acme:INV-2003:v1", "llm_refused")]
