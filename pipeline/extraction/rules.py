"""The rules extractor (the default): an invoice's fields read from plain text with fixed patterns.

It reads labelled fields in the usual spellings (``Invoice number`` / ``Invoice #``, ``Issue date`` /
``Date``, ``Due date`` / ``Payment due``, ``VAT ID`` / ``Tax ID``, ``Subtotal``, ``VAT (20%)`` /
``Sales tax``, ``Total`` / ``Amount due``), the vendor (``From:`` / ``Vendor:`` or the letterhead's
first line), ISO or written-out dates, amounts with or without thousands separators, and the line
items table under a ``Description ... Qty ... Amount`` header. It returns text; whether the values
add up is validation's business. A document it cannot read is ``document_malformed`` (permanent).

A payload's optional ``"simulate"`` object lets tests and the demo ask for behaviour a model shows:
``{"transient_failures": 2}`` fails the first two attempts as an unavailable model, ``{"work_seconds": 3}``
takes that long (heartbeating meanwhile).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from typing import Any, Callable

from pipeline.errors import PermanentError, TransientError
from pipeline.extraction.document import Document
from pipeline.reasons import ErrorCode

NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_LINE = r"^[ \t]*{label}[ \t]*[:.#]?[ \t]*:?[ \t]*(?P<value>{value})[ \t]*$"
_FLAGS = re.I | re.M


def _field(label: str, value: str = r"\S.*?") -> re.Pattern[str]:
    return re.compile(_LINE.format(label=label, value=value), _FLAGS)


LABELLED = {
    "invoice_number": _field(r"invoice[ \t]*(?:number|no\.?|num\.?|#)", r"[A-Za-z0-9][\w./-]*"),
    "issue_date": _field(r"(?:issue[ \t]+date|invoice[ \t]+date|date[ \t]+of[ \t]+issue|date)"),
    "due_date": _field(r"(?:due[ \t]+date|payment[ \t]+due|due)"),
    "vendor": _field(r"(?:vendor|supplier|seller|from)"),
    "vendor_tax_id": _field(r"(?:vat[ \t]*(?:id|no\.?|number|reg\.?[ \t]*no\.?)|tax[ \t]*id|tin|ein|abn)",
                            r"[A-Za-z0-9][A-Za-z0-9 .-]*[A-Za-z0-9]"),
    "currency": _field(r"currency", r"[A-Za-z]{3}"),
}
SUBTOTAL = re.compile(rf"^[ \t]*sub-?[ \t]*total[ \t]*:?[ \t]*(?:[A-Z]{{3}}[ \t]+)?[€$£]?(?P<value>{NUM})", _FLAGS)
TAX = re.compile(
    rf"^[ \t]*(?:sales[ \t]+tax|vat|gst|tax)(?![ \t]*(?:id|no|number|reg))\b[^:\n]*:[ \t]*(?:[A-Z]{{3}}[ \t]+)?[€$£]?"
    rf"(?P<value>{NUM})", _FLAGS)
TOTAL = re.compile(
    rf"^[ \t]*(?:grand[ \t]+total|total[ \t]+due|amount[ \t]+due|total)\b[^:\n]*:[ \t]*(?P<pre>[A-Z]{{3}})?[ \t]*[€$£]?"
    rf"(?P<value>{NUM})[ \t]*(?P<post>[A-Z]{{3}})?[ \t]*$", _FLAGS)
TABLE_HEADER = re.compile(r"^.*\bdescription\b.*\b(?:qty|quantity)\b.*\bamount\b.*$", _FLAGS)
ROW = re.compile(rf"^[ \t]*(?P<description>\S.*?)[ \t]+(?P<quantity>{NUM})[ \t]+[€$£]?(?P<unit_price>{NUM})"
                 rf"[ \t]+[€$£]?(?P<amount>{NUM})[ \t]*$")
RULER = re.compile(r"^[\s=_-]*$")
DATE_FORMATS = ("%d %B %Y", "%d %b %Y", "%B %d, %Y", "%b %d, %Y", "%d.%m.%Y")


def _number(text: str) -> str:
    return text.replace(",", "")


ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _date(text: str) -> str:
    """ISO for a date in a known spelling; the text unchanged otherwise (validation's ``dates_parse``
    then names the problem). An ISO date (the usual spelling) is returned as it is at once: none of the
    written-out spellings could read it, and trying each cost a failed ``strptime`` apiece (half the
    extraction's time)."""
    if ISO_DATE.fullmatch(text):
        return text
    return _written_date(text)


def _written_date(text: str) -> str:
    for fmt in DATE_FORMATS:
        try:
            return dt.datetime.strptime(text, fmt).date().isoformat()
        except ValueError:
            continue
    return text


def _line_items(text: str) -> list[dict[str, str]]:
    header = TABLE_HEADER.search(text)
    if header is None:
        return []
    items: list[dict[str, str]] = []
    for line in text[header.end():].lstrip("\n").splitlines():
        if RULER.fullmatch(line):
            if items or not line.strip():
                break  # the ruler under the rows, or the blank line after them
            continue  # the ruler under the header
        row = ROW.match(line)
        if row is None:
            break
        items.append({name: (value if name == "description" else _number(value))
                      for name, value in row.groupdict().items()})
    return items


def _vendor(text: str) -> str | None:
    labelled = LABELLED["vendor"].search(text)
    if labelled:
        return labelled.group("value")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if first and first.lower() != "invoice" else None


def read_invoice(text: str) -> dict[str, Any]:
    """The invoice fields found in ``text`` (as text), or PermanentError(DOCUMENT_MALFORMED)."""
    fields: dict[str, Any] = {}
    for name, pattern in LABELLED.items():
        match = pattern.search(text)
        if match:
            fields[name] = match.group("value")
    fields["vendor"] = _vendor(text)
    total = TOTAL.search(text)
    subtotal, tax = SUBTOTAL.search(text), TAX.search(text)
    if total is not None:
        fields["total"] = _number(total.group("value"))
        fields.setdefault("currency", total.group("pre") or total.group("post"))
    if subtotal is not None and tax is not None:
        fields.update(subtotal=_number(subtotal.group("value")), tax=_number(tax.group("value")))
    fields["line_items"] = _line_items(text)
    required = ("invoice_number", "issue_date", "due_date", "vendor", "vendor_tax_id", "currency", "subtotal",
                "tax", "total", "line_items")
    if any(not fields.get(name) for name in required):
        raise PermanentError(ErrorCode.DOCUMENT_MALFORMED)
    fields["currency"] = fields["currency"].upper()
    fields.update(issue_date=_date(fields["issue_date"]), due_date=_date(fields["due_date"]))
    return fields


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
    text = document.text
    if text is None:
        raise PermanentError(ErrorCode.DOCUMENT_MALFORMED)
    _simulate(document, checkpoint)
    return read_invoice(text)


invoice_extractor.extractor_name = "rules"  # type: ignore[attr-defined]
