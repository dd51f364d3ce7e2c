"""Validation of extracted invoice fields: the schema, then the business rules, in a fixed order.

A failure is permanent (the same input fails again): a shape that is not the schema raises
``PermanentError(SCHEMA_INVALID)``, a broken rule ``ValidationFailed(rule)`` naming the rule's code
(``reasons.ValidationRule``). Neither carries the values that failed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pydantic

from pipeline.errors import PermanentError, ValidationFailed
from pipeline.extraction.currencies import ISO_4217
from pipeline.extraction.invoice import InvoiceFields
from pipeline.reasons import ErrorCode, ValidationRule

CENT = Decimal("0.01")


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        return None


def _dates_parse(invoice: InvoiceFields) -> bool:
    return _date(invoice.issue_date) is not None and _date(invoice.due_date) is not None


def _due_after_issue(invoice: InvoiceFields) -> bool:
    issue, due = _date(invoice.issue_date), _date(invoice.due_date)
    return issue is not None and due is not None and due >= issue


def _line_amounts(invoice: InvoiceFields) -> bool:
    return all(abs(line.quantity * line.unit_price - line.amount) <= CENT for line in invoice.line_items)


def _subtotal(invoice: InvoiceFields) -> bool:
    return abs(sum((line.amount for line in invoice.line_items), Decimal(0)) - invoice.subtotal) <= CENT


def _total(invoice: InvoiceFields) -> bool:
    return abs(invoice.subtotal + invoice.tax - invoice.total) <= CENT


RULES: tuple[tuple[ValidationRule, Callable[[InvoiceFields], bool]], ...] = (
    (ValidationRule.DATES_PARSE, _dates_parse),
    (ValidationRule.DUE_AFTER_ISSUE, _due_after_issue),
    (ValidationRule.CURRENCY_KNOWN, lambda invoice: invoice.currency in ISO_4217),
    (ValidationRule.LINE_AMOUNT, _line_amounts),
    (ValidationRule.SUBTOTAL, _subtotal),
    (ValidationRule.TOTAL, _total),
)


def parse_invoice(fields: object) -> InvoiceFields:
    """The fields as the schema's model, or PermanentError(SCHEMA_INVALID)."""
    try:
        return InvoiceFields.model_validate(fields)
    except pydantic.ValidationError:
        raise PermanentError(ErrorCode.SCHEMA_INVALID) from None  # its text quotes the values: not kept


def broken_rule(invoice: InvoiceFields) -> ValidationRule | None:
    """The first rule ``invoice`` breaks, in the order of RULES; None when it passes them all."""
    return next((rule for rule, holds in RULES if not holds(invoice)), None)


def _money(value: Decimal) -> str:
    return format(value.quantize(CENT), "f")


def _number(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


def validate_invoice(fields: dict[str, Any]) -> dict[str, Any]:
    """Return the normalised fields (money as ``"12.50"``), or raise PermanentError / ValidationFailed."""
    invoice = parse_invoice(fields)
    rule = broken_rule(invoice)
    if rule is not None:
        raise ValidationFailed(rule)
    data = invoice.model_dump(mode="json")
    data["line_items"] = [
        {"description": line.description, "quantity": _number(line.quantity), "unit_price": _number(line.unit_price),
         "amount": _money(line.amount)}
        for line in invoice.line_items
    ]
    data.update(subtotal=_money(invoice.subtotal), tax=_money(invoice.tax), total=_money(invoice.total))
    return data
