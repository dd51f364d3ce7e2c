"""Idempotency keys (``tenant:document:vN``) and payload hashes. No key is ever built without a tenant."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pipeline.errors import InvalidInputError

TENANT_RE = re.compile(r"^[a-z][a-z0-9-]{1,32}$")
MAX_DOCUMENT_ID_LENGTH = 255


def validate_tenant(tenant_id: object) -> str:
    if not isinstance(tenant_id, str) or not TENANT_RE.fullmatch(tenant_id):
        raise InvalidInputError("tenant_id", f"must match {TENANT_RE.pattern}, got {tenant_id!r}")
    return tenant_id


def validate_document_id(document_id: object) -> str:
    if not isinstance(document_id, str) or not document_id:
        raise InvalidInputError("document_id", "must be a non-empty string")
    if len(document_id) > MAX_DOCUMENT_ID_LENGTH:
        raise InvalidInputError("document_id", f"must be at most {MAX_DOCUMENT_ID_LENGTH} characters")
    if not document_id.isprintable():
        raise InvalidInputError("document_id", "must contain printable characters only")
    return document_id


def validate_version(operation_version: object) -> int:
    if isinstance(operation_version, bool) or not isinstance(operation_version, int):
        raise InvalidInputError("operation_version", f"must be an int >= 1, got {operation_version!r}")
    if operation_version < 1:
        raise InvalidInputError("operation_version", f"must be an int >= 1, got {operation_version}")
    return operation_version


def build_idempotency_key(tenant_id: str, document_id: str, operation_version: int) -> str:
    """Return ``tenant:document:vN``; raise ``ValueError`` naming the first invalid field."""
    validate_tenant(tenant_id)
    validate_document_id(document_id)
    validate_version(operation_version)
    return f"{tenant_id}:{document_id}:v{operation_version}"


def canonical_json(payload: Any) -> str:
    """JSON with sorted keys and no whitespace; raises InvalidInputError for non-JSON values."""
    try:
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("payload", "must be JSON-serialisable (no NaN, sets or objects)") from exc


def payload_hash(payload: Any) -> str:
    """SHA-256 of the canonical JSON: equal payloads hash equal whatever their key order."""
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()
