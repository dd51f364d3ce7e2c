"""Every state change is one structured log line with tenant, job id, idempotency key, fence, attempt,
outcome and the three timings (queue wait, inference, commit) kept apart; never content or error text.
With DEBUG=1 a django.* line is printed once (it used to appear plain, then structured)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from pipeline import queue, relay, reviews
from pipeline.errors import PermanentError
from pipeline.models import Review, ReviewStatus
from pipeline.reasons import ErrorCode
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = {"tenant", "job_id", "idempotency_key", "fence", "attempt", "outcome"}
TIMINGS = {"queue_wait_seconds", "inference_seconds", "commit_seconds"}


def _lines(caplog) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for record in caplog.records:
        if isinstance(record.msg, dict) and "event" in record.msg:
            found.setdefault(record.msg["event"], []).append(record.msg)
    return found


def _leaky(document, checkpoint):
    raise PermanentError(ErrorCode.DOCUMENT_MALFORMED, "customer Maria Souza, CPF 123.456.789-09 is unreadable")


def test_a_jobs_life_is_logged_with_its_identity_outcome_and_timings(clock, caplog):
    caplog.set_level("INFO")
    user = get_user_model().objects.create_user("rita", password="x-long-password-1")
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(1), clock=clock)
    clock.advance(4)
    process_once("w1", clock=clock)
    relay.publish_pending(clock=clock)
    clock.advance(30)
    reviews.decide_review(Review.objects.get().pk, ReviewStatus.APPROVED, user, clock=clock)

    lines = _lines(caplog)
    for event in ("job.enqueued", "job.leased", "job.committed", "review.handed_off", "review.decided"):
        assert event in lines, event
        for line in lines[event]:
            assert {"tenant", "job_id", "idempotency_key", "outcome"} <= set(line), (event, line)
            assert (line["tenant"], line["job_id"], line["idempotency_key"]) == ("acme", job.pk, "acme:inv-1:v1")
    committed = lines["job.committed"][0]
    assert IDENTITY | TIMINGS <= set(committed)
    assert (committed["fence"], committed["attempt"], committed["outcome"]) == (1, 1, "committed")
    assert committed["queue_wait_seconds"] == 4.0
    assert committed["inference_seconds"] is not None and committed["commit_seconds"] is not None
    assert lines["job.leased"][0]["queue_wait_seconds"] == 4.0
    decided = lines["review.decided"][0]
    assert (decided["outcome"], decided["review_wait_seconds"], decided["end_to_end_seconds"]) == ("approved", 30.0, 34.0)
    text = caplog.text
    assert "INVOICE" not in text and "ACME" not in text  # nothing of the document's text


def test_a_failure_is_logged_with_its_code_never_its_text(clock, caplog):
    caplog.set_level("DEBUG")
    queue.enqueue("acme", "inv-2", 1, invoice(2), clock=clock)
    assert process_once("w1", extractor=_leaky, clock=clock).outcome == "dead_lettered"
    failed = _lines(caplog)["job.failed"][0]
    assert IDENTITY | TIMINGS <= set(failed)
    assert (failed["outcome"], failed["code"]) == ("dead_lettered", "document_malformed")
    assert failed["inference_seconds"] is not None and failed["commit_seconds"] is None
    assert "Maria Souza" not in caplog.text and "123.456.789-09" not in caplog.text


def test_a_release_is_logged(clock, caplog):
    caplog.set_level("INFO")
    queue.enqueue("acme", "inv-3", 1, invoice(3), clock=clock)
    lease = queue.lease_next("w1", clock=clock)
    queue.release(lease, clock=clock)
    released = _lines(caplog)["job.released"][0]
    assert IDENTITY <= set(released) and (released["outcome"], released["code"]) == ("released", "shutdown")


def test_debug_prints_a_django_line_once():
    env = {**os.environ, "DEBUG": "1", "LOG_LEVEL": "INFO"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    probe = "import logging; logging.getLogger('django.request').warning('probe-%s', 'line-7')"
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", probe], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert output.count("probe-line-7") == 1, output


PROBE = "import logging; logging.getLogger('pipeline.queue').warning('probe.line', extra={})"


def _probe(stderr: int | None = None, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LOG_LEVEL": "INFO", **env}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run([sys.executable, "manage.py", "shell", "-c", PROBE], cwd=ROOT, env=environment,
                          stdout=subprocess.PIPE, stderr=stderr if stderr is not None else subprocess.PIPE,
                          text=True, timeout=120)


def test_lines_are_json_when_stderr_is_not_a_terminal_and_console_lines_when_it_is():
    import json
    import pty

    piped = _probe()
    assert piped.returncode == 0, piped.stderr
    (line,) = [json.loads(text) for text in piped.stderr.splitlines() if "probe.line" in text]
    assert (line["event"], line["level"], line["logger"]) == ("probe.line", "warning", "pipeline.queue")

    terminal, tty = pty.openpty()
    try:
        assert _probe(stderr=tty).returncode == 0
        os.close(tty)
        seen = b""
        while True:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # the terminal's other side is closed: all was read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(terminal)
    (console,) = [text for text in seen.decode().splitlines() if "probe.line" in text]
    assert "[warning  ] probe.line" in console and not console.lstrip().startswith("{")

    forced = _probe(RELAYOPS_LOG_FORMAT="console")
    assert any("[warning  ] probe.line" in text for text in forced.stderr.splitlines())


def test_a_json_line_carries_the_traceback_of_the_exception_it_logs():
    import json

    environment = {**os.environ, "LOG_LEVEL": "INFO"}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    probe = ("import logging\nfrom relayops.logging import get_logger\n"
             "try:\n    1 / 0\nexcept ZeroDivisionError:\n"
             "    logging.getLogger('django.request').exception('stdlib.failed')\n"
             "    get_logger('pipeline.queue').exception('structlog.failed')\n")
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", probe], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = {line["event"]: line for line in map(json.loads, done.stderr.splitlines()) if "failed" in line["event"]}
    assert set(lines) == {"stdlib.failed", "structlog.failed"}, done.stderr
    for line in lines.values():
        assert line["exception"].startswith("Traceback (most recent call last):")
        assert "ZeroDivisionError: division by zero" in line["exception"] and "exc_info" not in line


def test_an_unknown_log_format_stops_start_up_with_a_clear_error():
    environment = {**os.environ, "RELAYOPS_LOG_FORMAT": "jsno"}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    wrong = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=environment, capture_output=True,
                           text=True, timeout=120)
    assert wrong.returncode != 0
    assert "RELAYOPS_LOG_FORMAT must be auto, console or json, got 'jsno'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
