"""``job_control cancel|run-now JOB_ID --reason "..."``, ``job_control pause|resume TENANT --reason "..."``,
``job_control set-limit TENANT LIMIT|default --reason "..."``: the admin's live-job actions and tenant
controls from a shell, through the same services (audited, tenant-scoped, permissioned).

The audit names ``--user`` (whose permissions and tenants then apply, exactly as in the admin) or,
without it, ``manage.py:<the account running the command>``, acting on every tenant: shell access to
the server is already every tenant's database.
"""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from controls import services
from controls.actors import Actor
from controls.errors import NotApplicableError, NotFoundError, NotPermittedError
from relayops.errors import InvalidInputError

REFUSED = (NotApplicableError, NotFoundError, NotPermittedError, InvalidInputError)


def _job_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CommandError(f"{text!r} is not a job id") from None


class Command(BaseCommand):
    help = "Cancel or run now a job; pause or resume a tenant's intake; set its reprocess limit. Audited."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        for name, target, helptext in (
            ("cancel", "job_id", "cancel a queued or leased job"),
            ("run-now", "job_id", "make a delayed (retry-waiting) job claimable now"),
            ("pause", "tenant", "stop workers claiming a tenant's jobs"),
            ("resume", "tenant", "let workers claim a paused tenant's jobs again"),
            ("set-limit", "tenant", "set a tenant's reprocess limit per window"),
        ):
            sub = actions.add_parser(name, help=helptext)
            sub.add_argument(target)
            if name == "set-limit":
                sub.add_argument("limit", help="reprocesses per window, or 'default'")
            sub.add_argument("--reason", required=True, help="why: kept in the audit")
            sub.add_argument("--user", help="act as this user: their permissions and tenants apply")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = self._actor(options.get("user"))
        action, reason = options["action"], options["reason"]
        try:
            if action == "cancel":
                job = services.cancel_job(_job_id(options["job_id"]), actor, reason=reason)
                self.stdout.write(f"Cancelled job {job.pk} ({job.idempotency_key}).")
            elif action == "run-now":
                job = services.run_job_now(_job_id(options["job_id"]), actor, reason=reason)
                self.stdout.write(f"Job {job.pk} ({job.idempotency_key}) is due now.")
            elif action == "pause":
                intake = services.pause_intake(options["tenant"], actor, reason=reason)
                self.stdout.write(f"Paused the intake of {intake.tenant}: {intake.waiting} live jobs wait.")
            elif action == "resume":
                intake = services.resume_intake(options["tenant"], actor, reason=reason)
                self.stdout.write(f"Resumed the intake of {intake.tenant}: {intake.waiting} live jobs.")
            else:
                text = options["limit"]
                limit = None if text == "default" else _job_id(text)
                policy = services.set_reprocess_limit(options["tenant"], limit, actor, reason=reason)
                self.stdout.write(f"Reprocess limit of {options['tenant']}: {policy.limit} per "
                                  f"{int(policy.window.total_seconds())} s.")
        except REFUSED as exc:
            raise CommandError(str(exc)) from None

    def _actor(self, username: str | None) -> Actor:
        if not username:
            return Actor.command(getpass.getuser())
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        return Actor.of_user(user)
