"""``create_api_key --tenant T --name N``: a new API key for a tenant, printed once (only its hash is kept)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.keys import create_api_key
from relayops.errors import InvalidInputError


class Command(BaseCommand):
    help = "Create an API key for a tenant and print it once; only its hash is stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="the tenant every request with this key acts for")
        parser.add_argument("--name", required=True, help="what the key is for, e.g. billing-bot (unique per tenant)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            new = create_api_key(options["tenant"], options["name"], created_by="create_api_key")
        except InvalidInputError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"API key {new.key.name!r} for tenant {new.key.tenant} (shown once; store it now):")
        self.stdout.write(new.raw)
