"""Structured logging (structlog) shared by the web process, qcluster and commands."""

from __future__ import annotations

from typing import Any

import structlog

pre_chain: list[Any] = [
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def _renderer():
    from django.conf import settings

    if getattr(settings, "LOG_FORMAT", "console") == "json":
        return structlog.processors.JSONRenderer()
    return structlog.dev.ConsoleRenderer(colors=False)


class _LazyRenderer:
    """Picks the renderer on first use, once settings are loaded."""

    _inner = None

    def __call__(self, logger, name, event_dict):
        if self._inner is None:
            self._inner = _renderer()
        return self._inner(logger, name, event_dict)


renderer = _LazyRenderer()

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
