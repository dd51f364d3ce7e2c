"""An injectable clock: services take ``clock=``; tests pass a FrozenClock instead of patching time."""

from __future__ import annotations

import datetime as dt
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime: ...


class SystemClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def now(self) -> dt.datetime:
        return self._now

    def advance(self, seconds: float) -> dt.datetime:
        self._now += dt.timedelta(seconds=seconds)
        return self._now


system_clock = SystemClock()


def seconds_since(now: dt.datetime, since: dt.datetime | None) -> float | None:
    """How long ago ``since`` was, in seconds, never negative; None when there is no ``since``."""
    return None if since is None else max((now - since).total_seconds(), 0.0)
