"""``create_operator alice --tenant acme --tenant globex [--auditor] [--password ...]``.

Creates a staff user in the Operators (or Auditors) group for exactly the given tenants, or brings an
existing user to that state. Without --password it prompts on a terminal, or generates one and
prints it once.
"""

from __future__ import annotations

import getpass
import secrets
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from relayops.errors import InvalidInputError
from tenancy.services import Role, create_member


class Command(BaseCommand):
    help = "Create (or update) an operator or auditor for a set of tenants."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--tenant", action="append", dest="tenant", default=None, metavar="TENANT",
            help="a tenant the user may see and act on; repeat for several (at least one)",
        )
        parser.add_argument("--auditor", action="store_true", help="view-only role (Auditors) instead of Operators")
        parser.add_argument("--password", default=None, help="the password; prompted for or generated when omitted")

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        tenants: list[str] = options["tenant"] or []
        if not tenants:
            raise CommandError("Give at least one --tenant.")
        role = Role.AUDITOR if options["auditor"] else Role.OPERATOR
        password: str | None = options["password"]
        generated = False
        if password is None and not self._exists(username):
            password, generated = self._new_password(options.get("stdin") or sys.stdin)
        try:
            member = create_member(username, tenants, role=role, password=password)
        except InvalidInputError as exc:
            raise CommandError(f"Cannot create {username}: {exc}") from exc
        verb = "Created" if member.created else "Updated"
        self.stdout.write(f"{verb} {role.label[:-1].lower()} {username} for tenants: {', '.join(member.tenants)}")
        if generated:
            self.stdout.write(f"Generated password (shown once): {password}")
        elif password is None:
            self.stdout.write("Password unchanged.")

    @staticmethod
    def _exists(username: str) -> bool:
        from django.contrib.auth import get_user_model

        return get_user_model().objects.filter(username=username).exists()

    def _new_password(self, stdin: Any) -> tuple[str, bool]:
        if not getattr(stdin, "isatty", lambda: False)():
            return secrets.token_urlsafe(15), True
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("The passwords do not match.")
        if not first:
            raise CommandError("The password must not be empty.")
        return first, False
