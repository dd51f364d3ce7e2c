"""Validation of extracted invoice fields. A failure is permanent: the same input fails again."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from pipeline.errors import PermanentError
from pipeline.reasons import ErrorCode

REQUIRED = ("invoice_number", "issue_date", "vendor", "total", "currency")


def validate_invoice(fields: dict[str, Any]) -> dict[str, Any]:
    """Return the normalised fields, or raise PermanentError(VALIDATION_FAILED)."""
    if not isinstance(fields, dict) or any(not fields.get(name) for name in REQUIRED):
        raise PermanentError(ErrorCode.SCHEMA_INVALID)
    try:
        total = Decimal(str(fields["total"]))
        dt.date.fromisoformat(fields["issue_date"])
    except (InvalidOperation, ValueError) as exc:
        raise PermanentError(ErrorCode.VALIDATION_FAILED) from exc
    if total <= 0 or len(fields["currency"]) != 3:
        raise PermanentError(ErrorCode.VALIDATION_FAILED)
    return {**fields, "total": f"{total:.2f}"}
