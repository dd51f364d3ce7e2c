"""The lease rescuer: ends jobs whose last attempt's lease expired (the worker died), through the queue.

Expired leases with attempts left need no rescue: the claim takes them over with a new fence.
"""

from __future__ import annotations

import datetime as dt

from pipeline import queue
from pipeline.queue import ExpiryReport
from relayops.validation import check_int


class LeaseRescuer:
    def __init__(self, batch_size: int = 500) -> None:
        self.batch_size = check_int("batch_size", batch_size, low=1, high=10_000)

    def run_once(self, now: dt.datetime) -> ExpiryReport:
        return queue.expire_exhausted(now, limit=self.batch_size)
