"""Synthetic invoices, the rules extractor and validation: valid ones read back exactly, each broken
rule is named, malformed ones are refused; money is Decimal, within a cent."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.errors import PermanentError, ValidationFailed
from pipeline.extraction import rules, synthetic
from pipeline.extraction.document import Document
from pipeline.extraction.rules import invoice_extractor, read_invoice
from pipeline.extraction.validation import validate_invoice
from pipeline.reasons import ErrorCode, ValidationRule

SEEDS = range(60)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_valid_invoice_is_read_back_exactly(seed):
    invoice = synthetic.valid(seed)
    assert validate_invoice(read_invoice(invoice.text)) == invoice.fields


def test_both_layouts_are_among_the_valid_ones():
    texts = [synthetic.valid(seed).text for seed in SEEDS]
    assert any(t.startswith("INVOICE\n\nFrom:") for t in texts)  # the letter layout
    assert any("VAT ID:" in t and "Issue date:" in t for t in texts)  # the ledger layout
    assert any(re.search(r"\d,\d{3}\.\d{2}", t) for t in texts)  # thousands separators in the letter layout


def test_the_same_seed_gives_the_same_invoice():
    assert synthetic.valid("x").text == synthetic.valid("x").text != synthetic.valid("y").text


@pytest.mark.parametrize("rule", list(ValidationRule))
@pytest.mark.parametrize("seed", range(8))
def test_each_failing_invoice_breaks_its_rule_and_only_it_is_named(rule, seed):
    invoice = synthetic.failing(rule, seed)
    with pytest.raises(ValidationFailed) as failure:
        validate_invoice(read_invoice(invoice.text))
    assert failure.value.rule == rule and failure.value.code == ErrorCode.VALIDATION_FAILED
    assert invoice.text not in str(failure.value)


@pytest.mark.parametrize("kind", list(synthetic.Malformed))
@pytest.mark.parametrize("seed", range(5))
def test_malformed_invoices_are_refused_as_malformed(kind, seed):
    with pytest.raises(PermanentError) as failure:
        read_invoice(synthetic.malformed(kind, seed).text)
    assert failure.value.code == ErrorCode.DOCUMENT_MALFORMED


def test_the_corpus_holds_every_rule_and_kind():
    docs = synthetic.corpus(20, seed="demo")
    assert len(docs) == 20
    assert {d.expect for d in docs} == {"valid"} | set(ValidationRule.values) | set(synthetic.Malformed)


FIELDS = synthetic.valid(3).fields


@pytest.mark.parametrize(("change", "rule"), [
    ({"issue_date": "2026-13-01"}, ValidationRule.DATES_PARSE),
    ({"due_date": "soon"}, ValidationRule.DATES_PARSE),
    ({"due_date": "2025-01-01"}, ValidationRule.DUE_AFTER_ISSUE),
    ({"currency": "EURO"}, ValidationRule.CURRENCY_KNOWN),
    ({"currency": "XXX"}, ValidationRule.CURRENCY_KNOWN),
    ({"subtotal": "0.00"}, ValidationRule.SUBTOTAL),
    ({"tax": "999999.00"}, ValidationRule.TOTAL),
])
def test_each_rule_on_its_own(change, rule):
    with pytest.raises(ValidationFailed) as failure:
        validate_invoice({**FIELDS, **change})
    assert failure.value.rule == rule


def test_within_a_cent_passes_and_more_does_not():
    line = {"description": "Widget", "quantity": "3", "unit_price": "0.333", "amount": "1.00"}  # 0.999: within a cent
    base = {**FIELDS, "line_items": [line], "subtotal": "1.00", "tax": "0.20", "total": "1.20"}
    assert validate_invoice(base)["total"] == "1.20"
    with pytest.raises(ValidationFailed) as failure:
        validate_invoice({**base, "line_items": [{**line, "amount": "1.02"}], "subtotal": "1.02", "total": "1.22"})
    assert failure.value.rule == ValidationRule.LINE_AMOUNT


@pytest.mark.parametrize("fields", [
    None, [], {}, {**FIELDS, "total": "lots"}, {**FIELDS, "total": "NaN"}, {**FIELDS, "line_items": []},
    {**FIELDS, "extra": 1}, {k: v for k, v in FIELDS.items() if k != "vendor"}, {**FIELDS, "vendor": "  "},
])
def test_a_shape_that_is_not_the_schema_is_schema_invalid(fields):
    with pytest.raises(PermanentError) as failure:
        validate_invoice(fields)
    assert failure.value.code == ErrorCode.SCHEMA_INVALID and not isinstance(failure.value, ValidationFailed)


def test_money_is_normalised_to_cents_and_numbers_without_exponents():
    data = validate_invoice({**FIELDS, "line_items": [
        {"description": "x", "quantity": "1E+1", "unit_price": "2.50", "amount": 25}],
        "subtotal": 25, "tax": "0", "total": "25.000"})
    assert data["line_items"] == [{"description": "x", "quantity": "10", "unit_price": "2.5", "amount": "25.00"}]
    assert (data["subtotal"], data["tax"], data["total"]) == ("25.00", "0.00", "25.00")


def test_the_rules_extractor_reads_written_out_dates_and_thousands_separators():
    text = ("From: Initrode LLC\nTax ID: US123456789\nInvoice #: A-7\nDate: March 3, 2026\nPayment due: 2 Apr 2026\n\n"
            "Description        Qty   Unit price     Amount\n"
            "Server rack          2     1,250.00   2,500.00\n\n"
            "Subtotal: $2,500.00\nSales tax (8%): $200.00\nAmount due: USD 2,700.00\n")
    fields = validate_invoice(read_invoice(text))
    assert (fields["issue_date"], fields["due_date"], fields["currency"], fields["total"]) == (
        "2026-03-03", "2026-04-02", "USD", "2700.00")
    assert fields["vendor"] == "Initrode LLC" and fields["vendor_tax_id"] == "US123456789"


@pytest.mark.parametrize("payload", [None, "text", {"text": 5}, {"body": "x"}])
def test_a_payload_without_text_is_malformed(payload):
    with pytest.raises(PermanentError) as failure:
        invoice_extractor(Document("acme", "d", payload, 1), lambda: None)
    assert failure.value.code == ErrorCode.DOCUMENT_MALFORMED


@given(st.one_of(
    st.dates().map(lambda d: d.isoformat()),  # the usual spelling
    st.dates().flatmap(lambda d: st.sampled_from([d.strftime(f) for f in rules.DATE_FORMATS])),
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"),  # ISO-shaped, not always a date (2026-02-30)
    st.text(alphabet="0123456789-. ,JanuryFebMchApilJgSptOoNvD", max_size=20),
))
def test_an_iso_date_is_kept_at_once_and_reads_as_trying_every_spelling_reads_it(text):
    """The ISO fast path changes nothing: each text reads as trying every written-out spelling reads it."""
    assert rules._date(text) == rules._written_date(text)
