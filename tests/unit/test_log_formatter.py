"""The log formatter's short way for structlog's own lines writes what structlog's own formatter writes;
every other record goes structlog's way (tests/integration/test_state_logs.py runs them in processes)."""

from __future__ import annotations

import json
import logging

import pytest
import structlog

from relayops import logging as relayops_logging


@pytest.fixture
def records():
    """What the root logger is handed, kept (the records as the configured handler would see them)."""
    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    handler = Keep(level=logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    before = root.level
    root.setLevel(logging.DEBUG)
    yield kept
    root.removeHandler(handler)
    root.setLevel(before)


def formatters() -> tuple[logging.Formatter, logging.Formatter]:
    kwargs = {"processor": relayops_logging._JSONLines(), "foreign_pre_chain": relayops_logging.pre_chain}
    return structlog.stdlib.ProcessorFormatter(**kwargs), relayops_logging.Formatter(**kwargs)


def test_a_structlog_line_reads_as_structlog_s_own_formatter_writes_it(records):
    relayops_logging.get_logger("pipeline.processing").info(
        "job.committed", tenant="acme", job_id=7, idempotency_key="acme:inv-1:v1", fence=2, attempt=1,
        outcome="committed", queue_wait_seconds=0.5, inference_seconds=None, commit_seconds=0.0004)
    theirs, ours = formatters()
    record = records[-1]
    assert ours.format(record) == theirs.format(record)
    assert '"event": "job.committed"' in ours.format(record) and '"job_id": 7' in ours.format(record)
    assert isinstance(record.msg, dict)  # the record is left as it came: other handlers see it unchanged


def test_a_line_with_a_traceback_and_a_foreign_line_go_structlog_s_way(records):
    theirs, ours = formatters()
    try:
        raise ValueError("boom")
    except ValueError:  # a handler formats the line as it is logged, inside the except block
        relayops_logging.get_logger("pipeline.processing").exception("job.crashed", job_id=7)
        crashed = records[-1]
        assert ours.format(crashed) == theirs.format(crashed) and "ValueError: boom" in ours.format(crashed)
    logging.getLogger("django.request").warning("a plain %s line", "stdlib")
    plain = records[-1]
    ours_plain, theirs_plain = json.loads(ours.format(plain)), json.loads(theirs.format(plain))
    assert ours_plain.pop("timestamp") and theirs_plain.pop("timestamp")  # stamped as each formats it
    assert ours_plain == theirs_plain and ours_plain["event"] == "a plain stdlib line"


def test_the_settings_use_it():
    handler = logging.getLogger().handlers[0]
    assert type(handler.formatter) is relayops_logging.Formatter, handler.formatter
