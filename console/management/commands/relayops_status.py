"""``relayops_status [--tenant T] [--watch [SECONDS]]``: queue depth, lag and DLQ per tenant; drains per node.

An unknown tenant is an error (exit 1). ``--watch`` redraws in place on a terminal and writes plain
frames, one after another and free of terminal codes, into a file or a pipe.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console import status
from pipeline.clock import system_clock


class Command(BaseCommand):
    help = "Per tenant: jobs by status, oldest due job age, outbox lag, DLQ size by reason; drains by node."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default=None, help="show this tenant only")
        parser.add_argument("--watch", nargs="?", type=float, const=2.0, default=None, metavar="SECONDS",
                            help="refresh every SECONDS (default 2) until Ctrl-C")

    def handle(self, *args: Any, **options: Any) -> None:
        interval: float | None = options["watch"]
        if interval is not None and interval <= 0:
            interval = 2.0
        tenant: str | None = options["tenant"]
        if tenant is not None and not status.known_tenant(tenant):
            raise CommandError(f"unknown tenant {tenant!r}: no job and no member has it")
        # On a terminal each frame replaces the last; into a file or a pipe, frames follow each other.
        redraw = "\033[H\033[J" if self.stdout.isatty() else "\n"
        if interval is not None:
            # Ctrl-C (SIGINT) ends --watch even when started from a shell that ignores it in the background.
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            while True:
                text = self._frame(tenant)
                if interval is None:
                    self.stdout.write(text)
                    return
                self.stdout.write(redraw + text)
                self.stdout.flush()
                time.sleep(interval)
        except KeyboardInterrupt:  # Ctrl-C ends --watch, wherever it lands
            return

    @staticmethod
    def _frame(tenant: str | None) -> str:
        now = system_clock.now()
        return status.render(now, status.tenants(now, tenant), status.nodes(now, dt.timedelta(minutes=1)))
