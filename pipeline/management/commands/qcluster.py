"""``qcluster``: django-q2's command, whose start-up checks are every check but the URLconf's.

A cluster serves no URL. Checking the URLconf imports it, and with it every view and the API framework:
megabytes that each forked worker would carry for nothing (docs/performance.md, "After: a worker's
memory and its log lines").
Every other tagged check runs and an error stops the cluster, as before. Untagged checks do not run
here: RelayOps' own all carry a tag (a test holds it); Django's auth (its middleware order) and
django-axes' (its settings) have none and concern the web process, whose ``migrate`` and ``check`` run
them.
This app comes before ``django_q`` in INSTALLED_APPS, so this command is the one ``manage.py`` runs.
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.management.base import CommandParser
from django_q.management.commands import qcluster


class Command(qcluster.Command):
    requires_system_checks: list[str] = []  # handle() runs them, without the URLconf's

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--skip-checks", action="store_true", help="Skip the start-up system checks.")

    def startup_checks(self) -> None:
        """Every tagged check but the URLconf's (``urls``: the URLconf and the URL settings);
        SystemCheckError on an error, as Django's own."""
        self.check(tags=sorted(checks.registry.registry.tags_available() - {checks.Tags.urls}))

    def handle(self, *args: Any, **options: Any) -> None:
        if not options.get("skip_checks"):  # call_command skips them unless given skip_checks=False
            self.startup_checks()
        super().handle(*args, **options)
