"""Synthetic plain-text invoices, generated here and never fetched: valid ones in two layouts, one
that breaks each validation rule, and malformed ones. Tests, the demo and the benchmarks use them.

Everything is derived from ``seed``: the same seed gives the same invoice, byte for byte.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import random
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pipeline.reasons import ValidationRule

CENT = Decimal("0.01")
VENDORS = (
    ("Globex Supplies Ltd", "GB", "14 Harbour Road", "Bristol BS1 4QA"),
    ("Initech GmbH", "DE", "Lindenstrasse 9", "10969 Berlin"),
    ("Umbrella Logistics BV", "NL", "Keizersgracht 221", "1016 DV Amsterdam"),
    ("Stark Industrial Parts AB", "SE", "Sveavagen 44", "111 34 Stockholm"),
    ("Hooli Office Services SA", "FR", "12 rue de la Paix", "75002 Paris"),
    ("Vandelay Import Export Inc", "US", "129 West 81st Street", "New York, NY 10024"),
    ("Wayne Components Corp", "CA", "88 Queen Street West", "Toronto, ON M5H 2N2"),
)
CUSTOMERS = ("Acme Corporation", "Soylent Foods plc", "Cyberdyne Systems", "Tyrell Trading Co", "Oscorp Ltd")
ITEMS = (
    ("Consulting, senior engineer (hours)", "hours"), ("Laptop docking station", "unit"),
    ("Ergonomic office chair", "unit"), ("Cloud hosting, monthly plan", "unit"), ("Printer toner, black", "unit"),
    ("On-site support visit", "unit"), ("Software licence, annual seat", "unit"), ("Shipping and handling", "unit"),
    ("Network switch, 24 ports", "unit"), ("Training workshop (hours)", "hours"),
)
CURRENCIES = {"GB": "GBP", "DE": "EUR", "NL": "EUR", "SE": "SEK", "FR": "EUR", "US": "USD", "CA": "CAD"}
TAX_RATES = {"GB": "20", "DE": "19", "NL": "21", "SE": "25", "FR": "20", "US": "8.875", "CA": "13"}


class Layout(enum.StrEnum):
    LEDGER = "ledger"  # European: vendor letterhead, ISO dates, "VAT ID", plain numbers
    LETTER = "letter"  # North American: "From:", written-out dates, "Tax ID", thousands separators


class Malformed(enum.StrEnum):
    NO_TOTAL = "no_total"
    NO_LINE_ITEMS = "no_line_items"
    NOT_AN_INVOICE = "not_an_invoice"


@dataclass(frozen=True)
class Line:
    description: str
    quantity: Decimal
    unit_price: Decimal
    amount: Decimal


@dataclass(frozen=True)
class InvoiceData:
    number: str
    issue: str  # as printed: ISO in the ledger layout, "14 February 2026" in the letter layout
    due: str
    vendor: str
    vendor_tax_id: str
    address: tuple[str, str]
    customer: str
    currency: str
    lines: tuple[Line, ...]
    subtotal: Decimal
    tax_rate: str
    tax: Decimal
    total: Decimal
    layout: Layout


@dataclass(frozen=True)
class SyntheticInvoice:
    document_id: str
    text: str
    expect: str  # "valid", a ValidationRule code, or a Malformed kind
    fields: dict[str, Any] | None  # what extraction + validation must return (valid invoices only)

    @property
    def payload(self) -> dict[str, Any]:
        return {"text": self.text, "metadata": {}}


def _money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def _date_text(day: dt.date, layout: Layout) -> str:
    return day.isoformat() if layout == Layout.LEDGER else f"{day.day} {day:%B %Y}"


def _lines(rng: random.Random) -> tuple[Line, ...]:
    lines = []
    for description, unit in rng.sample(ITEMS, rng.randint(1, 5)):
        quantity = Decimal(rng.choice(["1.5", "2.5", "4", "7.25"])) if unit == "hours" else Decimal(rng.randint(1, 12))
        price = Decimal(rng.randint(500, 250_000)) / 100
        lines.append(Line(description, quantity, price, _money(quantity * price)))
    return tuple(lines)


def _data(seed: int | str, total: Decimal | None = None) -> InvoiceData:
    rng = random.Random(f"relayops-synthetic:{seed}")
    vendor, country, street, city = rng.choice(VENDORS)
    layout = Layout.LETTER if country in ("US", "CA") else Layout.LEDGER
    lines = _lines(rng) if total is None else (Line("Services as agreed", Decimal(1), total, total),)
    subtotal = sum((line.amount for line in lines), Decimal(0))
    rate = TAX_RATES[country] if total is None else "0"
    tax = _money(subtotal * Decimal(rate) / 100)
    issue = dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(0, 364))
    due = issue + dt.timedelta(days=rng.choice([14, 30, 45, 60]))
    return InvoiceData(
        number=f"INV-{issue.year}-{rng.randint(1, 99_999):05d}", issue=_date_text(issue, layout),
        due=_date_text(due, layout), vendor=vendor, vendor_tax_id=f"{country}{rng.randint(10**8, 10**9 - 1)}",
        address=(street, city), customer=rng.choice(CUSTOMERS), currency=CURRENCIES[country], lines=lines,
        subtotal=subtotal, tax_rate=rate, tax=tax, total=subtotal + tax, layout=layout,
    )


def _num(value: Decimal, layout: Layout) -> str:
    return f"{value:,.2f}" if layout == Layout.LETTER else f"{value:.2f}"


def _qty(value: Decimal) -> str:
    return format(value.normalize(), "f")


def render(data: InvoiceData) -> str:
    """The invoice as a supplier's system would print it to plain text."""
    if data.layout == Layout.LETTER:
        return _letter(data)
    rule = "-" * 78
    rows = [f"{line.description:<44}{_qty(line.quantity):>6}{line.unit_price:>14.2f}{line.amount:>14.2f}"
            for line in data.lines]
    return "\n".join([
        data.vendor, *data.address, f"VAT ID: {data.vendor_tax_id}", "", "INVOICE", "",
        f"Invoice number: {data.number}", f"Issue date: {data.issue}", f"Due date: {data.due}",
        f"Currency: {data.currency}", "", f"Bill to: {data.customer}", "",
        f"{'Description':<44}{'Qty':>6}{'Unit price':>14}{'Amount':>14}", rule, *rows, rule,
        f"{'Subtotal:':<64}{data.subtotal:>14.2f}", f"{f'VAT ({data.tax_rate}%):':<64}{data.tax:>14.2f}",
        f"{'Total:':<60}{data.total:>14.2f} {data.currency}", "",
        "Payment by bank transfer within the terms above. Thank you for your business.", "",
    ])


def _letter(data: InvoiceData) -> str:
    rows = [f"{line.description:<40}{_qty(line.quantity):>10}{_num(line.unit_price, data.layout):>14}"
            f"{_num(line.amount, data.layout):>14}" for line in data.lines]
    return "\n".join([
        "INVOICE", "", f"From: {data.vendor}", f"      {data.address[0]}, {data.address[1]}",
        f"Tax ID: {data.vendor_tax_id}", f"To: {data.customer}", "", f"Invoice #: {data.number}",
        f"Date: {data.issue}", f"Payment due: {data.due}", "",
        f"{'Item description':<40}{'Quantity':>10}{'Unit price':>14}{'Amount':>14}", *rows, "",
        f"Subtotal: {_num(data.subtotal, data.layout)}", f"Sales tax ({data.tax_rate}%): {_num(data.tax, data.layout)}",
        f"Amount due: {data.currency} {_num(data.total, data.layout)}", "",
        "Questions about this invoice? Reply to the sender.", "",
    ])


def _iso(text: str) -> str:
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        return dt.datetime.strptime(text, "%d %B %Y").date().isoformat()


def expected_fields(data: InvoiceData) -> dict[str, Any]:
    """The normalised fields extraction and validation must return for ``data``."""
    return {
        "invoice_number": data.number, "issue_date": _iso(data.issue), "due_date": _iso(data.due),
        "vendor": data.vendor, "vendor_tax_id": data.vendor_tax_id, "currency": data.currency,
        "line_items": [{"description": line.description, "quantity": _qty(line.quantity),
                        "unit_price": _qty(line.unit_price), "amount": f"{line.amount:.2f}"} for line in data.lines],
        "subtotal": f"{data.subtotal:.2f}", "tax": f"{data.tax:.2f}", "total": f"{data.total:.2f}",
    }


def valid(seed: int | str = 0, *, total: str | None = None) -> SyntheticInvoice:
    """A valid invoice; with ``total``, a one-line, tax-free one for exactly that amount."""
    data = _data(seed, Decimal(total) if total is not None else None)
    return SyntheticInvoice(f"invoice-{seed}", render(data), "valid", expected_fields(data))


def _break(data: InvoiceData, rule: ValidationRule) -> InvoiceData:
    replace = dataclasses.replace
    if rule == ValidationRule.LINE_AMOUNT:  # one line's amount is off; the sums follow the wrong amount
        first = replace(data.lines[0], amount=data.lines[0].amount + 1)
        return replace(data, lines=(first, *data.lines[1:]), subtotal=data.subtotal + 1, total=data.total + 1)
    if rule == ValidationRule.SUBTOTAL:
        return replace(data, subtotal=data.subtotal + 5, total=data.total + 5)
    if rule == ValidationRule.TOTAL:
        return replace(data, total=data.total + 10)
    if rule == ValidationRule.DATES_PARSE:  # a day February never has
        return replace(data, issue="2026-02-30" if data.layout == Layout.LEDGER else "30 February 2026")
    if rule == ValidationRule.DUE_AFTER_ISSUE:
        return replace(data, issue=data.due, due=data.issue)
    assert rule == ValidationRule.CURRENCY_KNOWN
    return replace(data, currency="XYZ")


def failing(rule: ValidationRule | str, seed: int | str = 0) -> SyntheticInvoice:
    """A well-formed invoice that breaks ``rule`` and only it."""
    rule = ValidationRule(rule)
    data = _data(seed)
    return SyntheticInvoice(f"invoice-{seed}-{rule.value}", render(_break(data, rule)), rule.value, None)


def malformed(kind: Malformed | str, seed: int | str = 0) -> SyntheticInvoice:
    """Text the rules extractor cannot read as an invoice."""
    kind = Malformed(kind)
    text = render(_data(seed))
    lines = text.splitlines()
    if kind == Malformed.NO_TOTAL:
        text = "\n".join(line for line in lines if not line.startswith(("Total", "Amount due")))
    elif kind == Malformed.NO_LINE_ITEMS:
        text = "\n".join(line for line in lines if not any(item in line for item, _ in ITEMS))
    else:
        text = ("Dear team,\n\nthank you for the meeting last Tuesday. As discussed, we will send the signed\n"
                "contract next week. The invoice itself follows separately.\n\nKind regards,\nPat\n")
    return SyntheticInvoice(f"invoice-{seed}-{kind.value}", text, kind.value, None)


def corpus(count: int, seed: int | str = 0) -> list[SyntheticInvoice]:
    """``count`` invoices: mostly valid, with every broken rule and every malformed kind among them."""
    odd: list[SyntheticInvoice] = [failing(rule, f"{seed}-{rule.value}") for rule in ValidationRule]
    odd += [malformed(kind, f"{seed}-{kind.value}") for kind in Malformed]
    docs = [valid(f"{seed}-{n}") for n in range(max(count - len(odd), 0))] + odd
    return docs[:count]
