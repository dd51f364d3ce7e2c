"""Connection faults in RelayOps' own bookkeeping: drop the connection, back off, try again, bounded.

A dropped connection, a restarted database or a killed backend is never a job's fault. Django keeps a
dead connection until told otherwise, so every retry starts by forgetting it; the next query opens a
fresh one. Only connection faults are retried (``OperationalError``, ``InterfaceError``): any other
database error is a bug or bad data, and retrying it would loop.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from django.db import Error, InterfaceError, OperationalError, connection

from relayops.logging import get_logger

log = get_logger(__name__)

T = TypeVar("T")

CONNECTION_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
FIRST_DELAY_SECONDS = 0.05
MAX_DELAY_SECONDS = 1.0  # once the database is back, a waiting worker notices within this
BUDGET_SECONDS = 60.0  # an outage longer than this is left to the lease's expiry


def drop_connection() -> None:
    """Forget this thread's database connection; the next query opens a fresh one."""
    try:
        connection.close()
    except Error:  # closing a connection the server already dropped may complain; it is gone either way
        pass


def retrying(
    call: Callable[[], T], *, what: str, budget_seconds: float = BUDGET_SECONDS,
    sleep: Callable[[float], object] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
) -> T:
    """``call()``, retried after each connection fault with a fresh connection and a backoff that
    doubles up to ``MAX_DELAY_SECONDS``, for at most ``budget_seconds``; then the fault is raised."""
    delay = FIRST_DELAY_SECONDS
    give_up = monotonic() + budget_seconds
    while True:
        try:
            return call()
        except CONNECTION_ERRORS as exc:
            drop_connection()
            if monotonic() + delay > give_up:
                log.error("database.gave_up", what=what, error_type=type(exc).__name__)
                raise
            log.warning("database.retry", what=what, error_type=type(exc).__name__, delay_seconds=delay)
            sleep(delay)
            delay = min(delay * 2, MAX_DELAY_SECONDS)
