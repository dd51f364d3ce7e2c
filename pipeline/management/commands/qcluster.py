"""``qcluster``: django-q2's command, whose start-up checks are every check but the URLconf's, run in a
child process.

A cluster serves no URL. Checking the URLconf imports it, and with it every view and the API framework:
megabytes that each forked worker would carry for nothing (docs/performance.md, "After: a worker's
memory and its log lines"). The other checks import what they check (the admin's registrations, the
template engines): they run in a forked child, so the process that forks the workers stays without them.
Every other tagged check runs and an error stops the cluster, as before. Untagged checks do not run
here: RelayOps' own all carry a tag (a test holds it); Django's auth (its middleware order) and
django-axes' (its settings) have none and concern the web process, whose ``migrate`` and ``check`` run
them.
This app comes before ``django_q`` in INSTALLED_APPS, so this command is the one ``manage.py`` runs.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

from django.core import checks
from django.core.management.base import CommandError, CommandParser, SystemCheckError
from django.db import connections
from django_q.management.commands import qcluster


class Command(qcluster.Command):
    requires_system_checks: list[str] = []  # handle() runs them, without the URLconf's

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--skip-checks", action="store_true", help="Skip the start-up system checks.")

    def startup_checks(self) -> None:
        """Every tagged check but the URLconf's (``urls``: the URLconf and the URL settings), in a forked
        child that reports as Django's own checks do (warnings, then SystemCheckError on an error)."""
        tags = sorted(checks.registry.registry.tags_available() - {checks.Tags.urls})
        connections.close_all()  # the child opens its own connections, if a check needs one
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected; tests run qcluster itself
            code = 0
            try:
                self.check(tags=tags)
            except SystemCheckError as error:
                self.stderr.write(str(error), lambda text: text)  # as Django prints it
                code = 1
            except BaseException:
                traceback.print_exc()
                code = 2
            finally:
                try:
                    connections.close_all()
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)  # never on into the parent's code, whatever the cleanup met
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code == 1:
            raise SystemCheckError("the start-up checks above found errors: the cluster did not start")
        if code != 0:
            raise CommandError(f"the start-up checks did not complete (exit status {code}): the cluster did not start")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options.get("skip_checks"):  # call_command skips them unless given skip_checks=False
            self.startup_checks()
        super().handle(*args, **options)
