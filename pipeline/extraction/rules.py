"""The rules extractor: an invoice's fields pulled from plain text with fixed patterns (the default).

A document payload is ``{"text": "..."}``; the optional ``"simulate"`` object lets tests and the demo
ask for behaviour a real extractor shows: ``{"transient_failures": 2}`` fails the first two attempts
as an unavailable model, ``{"work_seconds": 3}`` takes that long (heartbeating meanwhile).
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable

from pipeline.errors import PermanentError, TransientError
from pipeline.extraction.document import Document
from pipeline.reasons import ErrorCode

FIELDS = {
    "invoice_number": re.compile(r"^\s*invoice\s*(?:no|number|#)\s*[:.]?\s*(\S+)", re.I | re.M),
    "issue_date": re.compile(r"^\s*date\s*[:.]?\s*(\d{4}-\d{2}-\d{2})", re.I | re.M),
    "vendor": re.compile(r"^\s*vendor\s*[:.]?\s*(.+?)\s*$", re.I | re.M),
    "total": re.compile(r"^\s*total\s*[:.]?\s*([0-9]+(?:\.[0-9]{1,2})?)\s*([A-Z]{3})\s*$", re.I | re.M),
}


def _simulate(document: Document, checkpoint: Callable[[], None]) -> None:
    simulate = document.payload.get("simulate") or {}
    if document.attempt <= int(simulate.get("transient_failures", 0)):
        raise TransientError(ErrorCode.EXTRACTOR_UNAVAILABLE)
    work = float(simulate.get("work_seconds", 0))
    if work > 0:
        end = time.monotonic() + work
        while time.monotonic() < end:
            checkpoint()
            time.sleep(min(0.05, max(end - time.monotonic(), 0)))


def invoice_extractor(document: Document, checkpoint: Callable[[], None]) -> dict[str, Any]:
    """Extract invoice fields from ``payload["text"]`` with fixed rules."""
    payload = document.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        raise PermanentError(ErrorCode.DOCUMENT_MALFORMED)
    _simulate(document, checkpoint)
    text = payload["text"]
    fields: dict[str, Any] = {}
    for name, pattern in FIELDS.items():
        match = pattern.search(text)
        if match is None:
            raise PermanentError(ErrorCode.DOCUMENT_MALFORMED)
        fields[name] = match.group(1)
        if name == "total":
            fields["currency"] = match.group(2).upper()
    return fields
