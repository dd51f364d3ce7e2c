"""API keys as a service: create (the key is returned once, its hash stored), authenticate, revoke.

A key reads ``rk_<prefix>_<secret>``: the prefix (8 hex characters) identifies it in the admin and
in logs; the secret (32 random bytes) never leaves the response that created it. Keys are random
and long, so one SHA-256 (not a slow password hash) is the right hash: guessing is hopeless, and
checking costs one indexed lookup per request.
"""

from __future__ import annotations

import enum
import hashlib
import re
import secrets
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from ingest.models import ApiKey
from pipeline.clock import Clock, system_clock
from relayops.errors import InvalidInputError
from relayops.validation import check_text
from tenancy.names import validate_tenant

KEY_RE = re.compile(r"^rk_(?P<prefix>[0-9a-f]{8})_(?P<secret>[A-Za-z0-9_-]{43})$")
MAX_NAME_LENGTH = 100


def hash_key(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class NewKey:
    key: ApiKey
    raw: str  # shown once, never stored


def create_api_key(tenant: str, name: str, *, created_by: str = "", clock: Clock = system_clock) -> NewKey:
    """A new key for ``tenant`` named ``name`` (unique among the tenant's live keys).

    InvalidInputError names the bad field; nothing is written then.
    """
    validate_tenant(tenant)
    check_text("name", name, max_length=MAX_NAME_LENGTH)
    if ApiKey.objects.filter(tenant=tenant, name=name, revoked_at__isnull=True).exists():
        raise InvalidInputError("name", f"tenant {tenant} already has a live key named {name!r}; revoke it first")
    for _ in range(5):  # a prefix collision is a one in four billion event; retry it
        prefix = secrets.token_hex(4)
        raw = f"rk_{prefix}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                key = ApiKey.objects.create(tenant=tenant, name=name, prefix=prefix, key_hash=hash_key(raw),
                                            created_at=clock.now(), created_by=created_by[:150])
            return NewKey(key, raw)
        except IntegrityError:
            if ApiKey.objects.filter(tenant=tenant, name=name, revoked_at__isnull=True).exists():
                raise InvalidInputError("name", f"tenant {tenant} already has a live key named {name!r}") from None
    raise RuntimeError("could not draw a unique key prefix")  # pragma: no cover


class KeyState(enum.StrEnum):
    VALID = "valid"
    MALFORMED = "malformed"  # not shaped like a RelayOps key
    UNKNOWN = "unknown"
    REVOKED = "revoked"


@dataclass(frozen=True)
class KeyCheck:
    state: KeyState
    key: ApiKey | None = None


def authenticate(raw: str) -> KeyCheck:
    """Which live key ``raw`` is. Malformed and unknown keys cost no more than one lookup by hash."""
    if not isinstance(raw, str) or KEY_RE.fullmatch(raw) is None:
        return KeyCheck(KeyState.MALFORMED)
    key = ApiKey.objects.filter(key_hash=hash_key(raw)).first()
    if key is None:
        return KeyCheck(KeyState.UNKNOWN)
    return KeyCheck(KeyState.VALID, key) if key.active else KeyCheck(KeyState.REVOKED, key)


def revoke_api_key(key_id: int, *, by: str = "", clock: Clock = system_clock) -> bool:
    """Revoke a key at once: its next request is refused. Guard: the key is still live. Returns False
    when it was already revoked (or does not exist): nothing changes, the first revocation stands."""
    if isinstance(key_id, bool) or not isinstance(key_id, int):
        raise InvalidInputError("key_id", "must be an int")
    return bool(ApiKey.objects.filter(pk=key_id, revoked_at__isnull=True).update(
        revoked_at=clock.now(), revoked_by=by[:150]))
