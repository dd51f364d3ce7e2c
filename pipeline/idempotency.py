"""Idempotency keys (``tenant:document:vN``) and payload hashes. No key is ever built without a tenant."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from relayops.errors import InvalidInputError
from relayops.validation import check_int
from tenancy.names import TENANT_RE, validate_tenant

__all__ = [
    "TENANT_RE", "validate_tenant", "validate_document_id", "validate_version", "build_idempotency_key",
    "canonical_json", "payload_hash",
]

MAX_DOCUMENT_ID_LENGTH = 255  # Job.document_id
MAX_OPERATION_VERSION = 2**31 - 1  # Job.operation_version is an integer column
MAX_KEY_LENGTH = 300  # Job.idempotency_key


def validate_document_id(document_id: object) -> str:
    if not isinstance(document_id, str) or not document_id:
        raise InvalidInputError("document_id", "must be a non-empty string")
    if len(document_id) > MAX_DOCUMENT_ID_LENGTH:
        raise InvalidInputError("document_id", f"must be at most {MAX_DOCUMENT_ID_LENGTH} characters")
    if not document_id.isprintable():
        raise InvalidInputError("document_id", "must contain printable characters only")
    return document_id


def validate_version(operation_version: object) -> int:
    return check_int("operation_version", operation_version, low=1, high=MAX_OPERATION_VERSION)


def build_idempotency_key(tenant_id: str, document_id: str, operation_version: int) -> str:
    """Return ``tenant:document:vN``; raise InvalidInputError (a ValueError) naming the first invalid field."""
    validate_tenant(tenant_id)
    validate_document_id(document_id)
    validate_version(operation_version)
    key = f"{tenant_id}:{document_id}:v{operation_version}"
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInputError("idempotency_key", f"{key[:40]}... is longer than {MAX_KEY_LENGTH} characters")
    return key


def canonical_json(payload: Any) -> str:
    """JSON with sorted keys and no whitespace; raises InvalidInputError for non-JSON values, and for
    NUL characters and lone surrogates, which PostgreSQL's JSON cannot store."""
    try:
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("payload", "must be JSON-serialisable (no NaN, sets or objects)") from exc
    if "\\u0000" in text.replace("\\\\", ""):  # an escaped NUL, not an escaped backslash before "u0000"
        raise InvalidInputError("payload", "must not contain NUL (\\u0000) characters")
    try:
        json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError("payload", "must be valid Unicode (no lone surrogates)") from exc
    return text


def payload_hash(payload: Any) -> str:
    """SHA-256 of the canonical JSON: equal payloads hash equal whatever their key order."""
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()
