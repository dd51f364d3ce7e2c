"""Re-encrypt every webhook endpoint's secret under the current first key (after a key rotation)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webhooks.services import reencrypt_secrets


class Command(BaseCommand):
    help = (
        "Re-encrypt every webhook endpoint's secret with the first of RELAYOPS_WEBHOOK_SECRET_KEYS (or the "
        "key derived from SECRET_KEY). Run it after putting a new key in front; then the old key may go."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        done, unreadable = reencrypt_secrets()
        self.stdout.write(f"Re-encrypted {done} endpoint secret(s) with the current key.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} endpoint secret(s) cannot be read with the configured keys (ids "
                f"{', '.join(map(str, unreadable[:20]))}): give those endpoints a new secret in the admin."
            )
