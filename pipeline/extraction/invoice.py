"""The invoice schema: the fields every extractor returns, as pydantic models (money is Decimal).

The same schema validates what an extractor returned (``pipeline.extraction.validation``) and is
the JSON schema the LLM extractor asks a model to answer in.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Money = Annotated[Decimal, Field(allow_inf_nan=False, max_digits=20, decimal_places=6)]
Currency = Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True, min_length=1, max_length=10)]
DateText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]

MAX_LINE_ITEMS = 500


class LineItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
    quantity: Money
    unit_price: Money
    amount: Money


class InvoiceFields(BaseModel):
    """What an extractor reads from an invoice. Dates are ``YYYY-MM-DD`` text: whether they are real
    dates is a business rule (``dates_parse``), not a matter of shape."""

    model_config = ConfigDict(extra="forbid")

    invoice_number: Text
    issue_date: DateText
    due_date: DateText
    vendor: Text
    vendor_tax_id: Text
    currency: Currency = Field(description="ISO 4217 code, e.g. EUR")
    line_items: Annotated[list[LineItem], Field(min_length=1, max_length=MAX_LINE_ITEMS)]
    subtotal: Money
    tax: Money
    total: Money


FIELD_NAMES = tuple(InvoiceFields.model_fields)
