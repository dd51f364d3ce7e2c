"""What the deployment's security settings need: a strong enough secret key, and the client's address
when RelayOps runs behind a proxy (the login lockout counts failures per address), the networks
allowed to scrape /metrics."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

MIN_SECRET_LENGTH = 50  # what Django's deploy check asks for (security.W009)
MIN_SECRET_CHARACTERS = 5
LOCAL_ONLY_SECRET = "relayops-insecure-local-only"
GENERATE = "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"


def secret_key(value: str, *, debug: bool) -> str:
    """``value`` if it may sign sessions and tasks; with DEBUG on, a missing key gets a local-only one.

    With DEBUG off a missing, short (under 50 characters), repetitive (under 5 distinct characters)
    or Django-generated insecure key is refused: RelayOps does not start.
    """
    if not value:
        if debug:
            return LOCAL_ONLY_SECRET
        raise ImproperlyConfigured(
            "Set SECRET_KEY. A local run gets one from ./run (it writes .env); production sets it in the "
            f"environment (docs/operations.md). Generate one with: {GENERATE}"
        )
    weak = (len(value) < MIN_SECRET_LENGTH or len(set(value)) < MIN_SECRET_CHARACTERS
            or value.startswith("django-insecure-"))
    if weak and not debug:
        raise ImproperlyConfigured(
            f"SECRET_KEY is too weak: it needs at least {MIN_SECRET_LENGTH} characters, at least "
            f"{MIN_SECRET_CHARACTERS} of them different. Generate one with: {GENERATE}"
        )
    return value


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, or with ``RELAYOPS_TRUSTED_PROXIES`` = N proxies in front,
    the address the outermost of them saw (the N-th from the right of X-Forwarded-For).

    Only addresses our own proxies appended are trusted: a client can put anything at the left.
    """
    proxies = settings.RELAYOPS_TRUSTED_PROXIES
    remote = request.META.get("REMOTE_ADDR")
    if proxies <= 0:
        return remote
    forwarded = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    return forwarded[-proxies] if len(forwarded) >= proxies else remote


def networks(name: str, values: list[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Addresses or networks (``10.0.0.0/8``, ``127.0.0.1``) from a setting; a bad one stops start-up."""
    parsed = []
    for value in values:
        try:
            parsed.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {value.strip()!r} is not an address or a network") from None
    return parsed
