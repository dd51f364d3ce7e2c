"""Structured logging (structlog) shared by the web process, qcluster and commands.

Lines go through the standard library's logging (Django's, django-q2's and ours alike) and are
rendered by ``RELAYOPS_LOG_FORMAT``: ``console`` or ``json``, or ``auto`` (the default), console when
stderr is a terminal and JSON otherwise.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

# No renderer prints the caller's file and line, thread or process: spare logging finding them for every
# record (the logging HOWTO's "Optimization" section names these switches). About 8 µs a line, and a job
# logs three (leased, committed, handed off).
logging._srcfile = None
logging.logThreads = False
logging.logProcesses = False
logging.logMultiprocessing = False

pre_chain: list[Any] = [
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


class _JSONLines:
    """A JSON object per line; an exception's traceback (Django's 500s, django-q2's errors) goes in
    ``exception`` as text, as a console line prints it."""

    def __init__(self) -> None:
        self.render = structlog.processors.JSONRenderer()

    def __call__(self, logger: Any, name: str, event_dict: Any) -> str | bytes:
        return self.render(logger, name, structlog.processors.format_exc_info(logger, name, event_dict))


def _renderer():
    from django.conf import settings

    chosen = getattr(settings, "LOG_FORMAT", "auto")
    if chosen == "json" or (chosen == "auto" and not sys.stderr.isatty()):
        return _JSONLines()
    return structlog.dev.ConsoleRenderer(colors=False)


class _LazyRenderer:
    """Picks the renderer on first use, once settings are loaded."""

    _inner = None

    def __call__(self, logger, name, event_dict):
        if self._inner is None:
            self._inner = _renderer()
        return self._inner(logger, name, event_dict)


renderer = _LazyRenderer()


class Formatter(structlog.stdlib.ProcessorFormatter):
    """structlog's formatter, with a short way for structlog's own lines (the pipeline's, three a job): a
    line with no exception or stack to print is rendered from a copy of its event dict and returned as
    is. structlog's way first copies the whole log record (for other handlers, which this one would not
    disturb) and then runs the standard formatter, whose ``%(message)s`` is that very text: a third of a
    line's cost. Every other record (Django's, django-q2's, one with a traceback) goes structlog's way."""

    def format(self, record: logging.LogRecord) -> str:
        name = getattr(record, "_name", None)
        if (name is None or not isinstance(record.msg, dict) or record.exc_info or record.stack_info
                or "exc_info" in record.msg or "stack_info" in record.msg):
            return super().format(record)
        logger = self.logger if self.logger is not None else getattr(record, "_logger", None)
        event: Any = {**record.msg, "_record": record, "_from_structlog": True}  # as structlog's way has it
        for processor in self.processors:
            event = processor(logger, name, event)
        return event

structlog.configure(
    processors=[
        structlog.stdlib.filter_by_level,
        *pre_chain,
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ],
    logger_factory=structlog.stdlib.LoggerFactory(),
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
