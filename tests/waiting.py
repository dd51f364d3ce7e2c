"""The one way tests wait: poll an observable state with a deadline, never sleep to synchronise."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_for(predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (and return it); fail naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
