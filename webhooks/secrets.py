"""Endpoint secrets: generated, encrypted at rest with Fernet, decrypted only to sign a delivery.

The keys are ``RELAYOPS_WEBHOOK_SECRET_KEYS`` (Fernet keys, the first encrypts, every one decrypts),
or, when that is empty, keys derived (HKDF-SHA256) from ``SECRET_KEY`` and then each of
``SECRET_KEY_FALLBACKS``. A database dump therefore shows Fernet tokens, never a secret; whoever has
the dump *and* the key can read them. Rotating: add the new key in front and keep the old one behind
it (or move the old SECRET_KEY into SECRET_KEY_FALLBACKS) until ``rotate_webhook_keys`` has re-encrypted
every endpoint; a secret whose key was dropped is unreadable and must be replaced.

``cryptography`` is imported at the first encryption or decryption, not with this module: the cluster's
processes import the webhooks app at start-up and a node that delivers no webhook never needs it
(it is the largest library a worker would otherwise carry, about 7 MB of its memory).
"""

from __future__ import annotations

import base64
import secrets as random
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from webhooks.errors import SecretUnreadableError

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

KEYS_PROBLEM = (
    "RELAYOPS_WEBHOOK_SECRET_KEYS must list Fernet keys (32 url-safe base64-encoded bytes each; "
    "make one with: python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
)
PREFIX = "whsec_"
HINT_LENGTH = 4


def generate() -> str:
    """A new endpoint secret: 256 random bits."""
    return PREFIX + random.token_urlsafe(32)


def hint(secret: str) -> str:
    """What may be shown of a secret to tell two apart: its last characters."""
    return "…" + secret[-HINT_LENGTH:]


def _derived(secret_key: str) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"relayops", info=b"webhook-secrets").derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(key)


def _configured() -> list[str]:
    return [k.strip() for k in settings.RELAYOPS["WEBHOOK_SECRET_KEYS"] if k.strip()]


def keys() -> list[bytes]:
    """The Fernet keys in use, the encrypting one first."""
    configured = _configured()
    if configured:
        return [k.encode() for k in configured]
    return [_derived(k) for k in [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])] if k]


def check_keys() -> None:
    """ImproperlyConfigured unless there is a key and each configured one is what Fernet takes (32
    url-safe base64-encoded bytes). A system check calls it at start-up; it needs no cryptography (keys
    derived from SECRET_KEY are well formed by construction)."""
    configured = _configured()
    try:
        if not configured and not settings.SECRET_KEY:
            raise ValueError("no key")
        for key in configured:
            if len(base64.urlsafe_b64decode(key.encode())) != 32:
                raise ValueError("not 32 bytes")
    except ValueError as exc:  # binascii.Error is one
        raise ImproperlyConfigured(KEYS_PROBLEM) from exc


def fernet() -> MultiFernet:
    from cryptography.fernet import Fernet, MultiFernet

    try:
        return MultiFernet([Fernet(key) for key in keys()])
    except (ValueError, TypeError) as exc:  # also an empty list: no SECRET_KEY and no keys
        raise ImproperlyConfigured(KEYS_PROBLEM) from exc


def encrypt(secret: str) -> str:
    return fernet().encrypt(secret.encode()).decode()


def decrypt(token: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretUnreadableError() from exc


def reencrypt(token: str) -> str:
    """The same secret under the current first key (key rotation)."""
    from cryptography.fernet import InvalidToken

    try:
        return fernet().rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretUnreadableError() from exc
