"""Endpoint secrets: generated, encrypted at rest with Fernet, decrypted only to sign a delivery.

The keys are ``RELAYOPS_WEBHOOK_SECRET_KEYS`` (Fernet keys, the first encrypts, every one decrypts),
or, when that is empty, keys derived (HKDF-SHA256) from ``SECRET_KEY`` and then each of
``SECRET_KEY_FALLBACKS``. A database dump therefore shows Fernet tokens, never a secret; whoever has
the dump *and* the key can read them. Rotating: add the new key in front and keep the old one behind
it (or move the old SECRET_KEY into SECRET_KEY_FALLBACKS) until ``rotate_webhook_keys`` has re-encrypted
every endpoint; a secret whose key was dropped is unreadable and must be replaced.
"""

from __future__ import annotations

import base64
import secrets as random

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from webhooks.errors import SecretUnreadableError

PREFIX = "whsec_"
HINT_LENGTH = 4


def generate() -> str:
    """A new endpoint secret: 256 random bits."""
    return PREFIX + random.token_urlsafe(32)


def hint(secret: str) -> str:
    """What may be shown of a secret to tell two apart: its last characters."""
    return "…" + secret[-HINT_LENGTH:]


def _derived(secret_key: str) -> bytes:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"relayops", info=b"webhook-secrets").derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(key)


def keys() -> list[bytes]:
    """The Fernet keys in use, the encrypting one first."""
    configured = [k.strip() for k in settings.RELAYOPS["WEBHOOK_SECRET_KEYS"] if k.strip()]
    if configured:
        return [k.encode() for k in configured]
    return [_derived(k) for k in [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])] if k]


def fernet() -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys()])
    except (ValueError, TypeError) as exc:  # also an empty list: no SECRET_KEY and no keys
        raise ImproperlyConfigured(
            "RELAYOPS_WEBHOOK_SECRET_KEYS must list Fernet keys (32 url-safe base64-encoded bytes each; "
            "make one with: python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
        ) from exc


def encrypt(secret: str) -> str:
    return fernet().encrypt(secret.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretUnreadableError() from exc


def reencrypt(token: str) -> str:
    """The same secret under the current first key (key rotation)."""
    try:
        return fernet().rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretUnreadableError() from exc
