"""``create_operator NAME --tenant T [--tenant U] [--auditor] [--password P]``, and explicit changes.

Creates a staff user in the Operators (or Auditors) group for the given tenants. Run again with the
same role and tenants it changes nothing (but the password, if given). An existing user's tenants and
role change only through ``--add-tenant``, ``--remove-tenant`` and ``--role``, and the command prints
what changed; anything else that would change them is refused. Without --password a new user's
password is prompted for on a terminal, or generated and printed once.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from relayops.errors import InvalidInputError
from tenancy.errors import MemberExistsError
from tenancy.services import Member, Role, change_member, create_member, generate_password


class Command(BaseCommand):
    help = (
        "Create an operator or auditor for a set of tenants; change an existing one's tenants or role with "
        "--add-tenant, --remove-tenant and --role."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--tenant", action="append", default=[], metavar="TENANT",
            help="creating: a tenant the user may see and act on; repeat for several (at least one)",
        )
        parser.add_argument("--auditor", action="store_true", help="creating: view-only role (Auditors), not Operators")
        parser.add_argument("--password", default=None,
                            help="the password (checked by the password validators); a new user's is prompted "
                                 "for or generated when omitted")
        changes = parser.add_argument_group("changing an existing user (prints what changed)")
        changes.add_argument("--add-tenant", action="append", default=[], metavar="TENANT", help="grant a tenant")
        changes.add_argument("--remove-tenant", action="append", default=[], metavar="TENANT",
                             help="take a tenant away (the user keeps at least one)")
        changes.add_argument("--role", choices=[role.value for role in Role], default=None, help="set the role")

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        changing = options["add_tenant"] or options["remove_tenant"] or options["role"]
        creating = options["tenant"] or options["auditor"]
        if changing and creating:
            raise CommandError("--tenant and --auditor create a user; --add-tenant, --remove-tenant and --role "
                               "change one. Use one kind or the other.")
        exists = get_user_model().objects.filter(username=username).exists()
        self.generated: str | None = None
        try:
            member = self._change(username, options) if changing else self._create(username, exists, options)
        except MemberExistsError as exc:
            raise CommandError(
                f"{exc}. Nothing was changed. To change an existing user, use --add-tenant, --remove-tenant "
                "or --role."
            ) from exc
        except InvalidInputError as exc:
            raise CommandError(f"Cannot {'change' if exists else 'create'} {username}: {exc}") from exc
        self._report(member)
        if self.generated:
            self.stdout.write(f"Generated password (shown once): {self.generated}")

    def _create(self, username: str, exists: bool, options: dict[str, Any]) -> Member:
        if not options["tenant"]:
            raise CommandError("Give at least one --tenant.")
        password: str | None = options["password"]
        generated = password is None and not exists
        if generated:
            password, generated = self._new_password(options.get("stdin") or sys.stdin)
        member = create_member(username, options["tenant"], role=Role.AUDITOR if options["auditor"] else Role.OPERATOR,
                               password=password)
        self.generated = password if generated else None
        return member

    def _change(self, username: str, options: dict[str, Any]) -> Member:
        return change_member(username, add=options["add_tenant"], remove=options["remove_tenant"],
                             role=Role(options["role"]) if options["role"] else None, password=options["password"])

    def _report(self, member: Member) -> None:
        role = member.role.value if member.role else "user"
        name, tenants = member.user.get_username(), ", ".join(member.tenants)
        if member.created:
            self.stdout.write(f"Created {role} {name} for tenants: {tenants}")
        elif member.changed:
            self.stdout.write(f"Updated {role} {name}: {'; '.join(member.changes())}. Tenants now: {tenants}")
        else:
            self.stdout.write(f"Unchanged: {role} {name} for tenants: {tenants}")

    def _new_password(self, stdin: Any) -> tuple[str, bool]:
        if not getattr(stdin, "isatty", lambda: False)():
            return generate_password(), True
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("The passwords do not match.")
        if not first:
            raise CommandError("The password must not be empty.")
        return first, False
