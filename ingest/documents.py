"""Submitting a document: the checks the API and the ``ingest`` command share, then ``queue.enqueue``.

The job's payload is ``{"text": content, "metadata": metadata}``, and its hash (what "the same
request" means) covers both: a retry must send the same text and the same metadata to get the
existing job back (200); anything else under the same key is a conflict (409). The deadline and
the attempts are how to run the job, not what it is: they are not in the hash, and a repeat
request does not change them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pipeline import queue
from pipeline.clock import Clock, system_clock
from pipeline.idempotency import build_idempotency_key, canonical_json
from pipeline.models import Job
from relayops.errors import InvalidInputError

MAX_DEADLINE_SECONDS = 30 * 24 * 3600
MAX_METADATA_BYTES = 16 * 1024
MAX_METADATA_DEPTH = 8


@dataclass(frozen=True)
class Submitted:
    job: Job
    created: bool


def _storable(field: str, text: str) -> None:
    """PostgreSQL's jsonb refuses NUL characters and text that is not UTF-8 (lone surrogates)."""
    if "\x00" in text:
        raise InvalidInputError(field, "must not contain NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(field, "must be valid Unicode (no lone surrogates)") from None


def check_content(content: object) -> str:
    if not isinstance(content, str):
        raise InvalidInputError("content", "must be a string (the document's text)")
    if not content.strip():
        raise InvalidInputError("content", "must not be empty")
    _storable("content", content)
    return content


def _walk(value: object, depth: int) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInputError("metadata", f"must be nested at most {MAX_METADATA_DEPTH} levels deep")
    if isinstance(value, str):
        _storable("metadata", value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable("metadata", str(key))
            _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _walk(item, depth + 1)


def check_metadata(metadata: object) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidInputError("metadata", "must be a JSON object")
    _walk(metadata, 1)
    try:
        size = len(canonical_json(metadata))
    except InvalidInputError:
        raise InvalidInputError("metadata", "must hold JSON values only (no NaN or infinity)") from None
    if size > MAX_METADATA_BYTES:
        raise InvalidInputError("metadata", f"must be at most {MAX_METADATA_BYTES} bytes as JSON")
    return metadata


def check_deadline(deadline_seconds: object) -> dt.timedelta | None:
    if deadline_seconds is None:
        return None
    if isinstance(deadline_seconds, bool) or not isinstance(deadline_seconds, (int, float)) or not (
        0 < deadline_seconds <= MAX_DEADLINE_SECONDS
    ):
        raise InvalidInputError("deadline_seconds", f"must be a number of seconds in (0, {MAX_DEADLINE_SECONDS}]")
    return dt.timedelta(seconds=deadline_seconds)


def submit(
    tenant: str, document_id: str, operation_version: int, content: str, *, metadata: dict[str, Any] | None = None,
    deadline_seconds: float | None = None, clock: Clock = system_clock,
) -> Submitted:
    """Enqueue ``tenant:document:vN`` unless it exists. Bad input raises InvalidInputError naming the field;
    the same key with another payload raises IdempotencyConflictError; nothing is written in either case."""
    build_idempotency_key(tenant, document_id, operation_version)  # names the first bad part of the key
    _storable("document_id", document_id)
    payload = {"text": check_content(content), "metadata": check_metadata(metadata)}
    deadline = check_deadline(deadline_seconds)
    job, created = queue.enqueue(tenant, document_id, operation_version, payload, deadline=deadline, clock=clock)
    return Submitted(job, created)
