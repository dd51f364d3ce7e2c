"""``relayops_health``: a liveness check for supervisors. Exit 0 healthy, 1 not (wedged or dead).

Fails when no drain of this node looked for work within ``--stale`` seconds, or when jobs have been
due that long and no drain of this node made progress (pipeline.runtime.liveness.assess).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from pipeline.runtime import liveness
from pipeline.clock import system_clock


class Command(BaseCommand):
    help = "Exit 0 if this node's drains are alive and keeping up, 1 otherwise."
    requires_system_checks: list[str] = []  # a probe: fast, and never blocked by a warning

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--node", default=None, help="the node to check (default: RELAYOPS_NODE_NAME)")
        parser.add_argument("--any-node", action="store_true", help="healthy if any node's drains are")
        parser.add_argument("--stale", type=float, default=None,
                            help="seconds without a beat or progress that count as stuck")

    def handle(self, *args: Any, **options: Any) -> None:
        node = None if options["any_node"] else options["node"] or liveness.node_name()
        stale = options["stale"] or settings.RELAYOPS["HEALTH_STALE_SECONDS"]
        try:
            health = liveness.assess(system_clock.now(), node=node, stale_seconds=stale)
        except DatabaseError as exc:
            raise CommandError(f"unhealthy: database unreachable ({type(exc).__name__})", returncode=1) from exc
        if not health.healthy:
            raise CommandError(f"unhealthy: {health.reason}", returncode=1)
        self.stdout.write(f"healthy: {health.reason}")
