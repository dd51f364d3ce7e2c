"""``relayops_status [--tenant T] [--watch [SECONDS]]``: queue depth, lag and DLQ per tenant."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

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
        while True:
            now = system_clock.now()
            text = status.render(now, status.tenants(now, options["tenant"]),
                                 status.nodes(now, dt.timedelta(minutes=1)))
            if interval is None:
                self.stdout.write(text)
                return
            self.stdout.write("\033[H\033[J" + text)  # clear the screen, then redraw
            try:
                time.sleep(interval)
            except KeyboardInterrupt:
                return
