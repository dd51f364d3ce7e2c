"""An invoice's fields as the review page lays out, compares and corrects them (review.fields)."""

from __future__ import annotations

import pytest

from pipeline.extraction import synthetic
from review.fields import CorrectionRefused, correct, diff, flatten, label, layout, rule_checks

INVOICE = synthetic.valid(3).fields


def test_paths_follow_the_invoice_whatever_the_stored_key_order():
    shuffled = {key: INVOICE[key] for key in reversed(list(INVOICE))}
    shuffled["line_items"] = [dict(reversed(list(line.items()))) for line in INVOICE["line_items"]]
    paths = list(flatten(shuffled))
    assert paths[:6] == ["invoice_number", "vendor", "vendor_tax_id", "issue_date", "due_date", "currency"]
    assert paths[6:10] == ["line_items.0.description", "line_items.0.quantity", "line_items.0.unit_price",
                           "line_items.0.amount"]
    assert paths[-3:] == ["subtotal", "tax", "total"]
    assert flatten(shuffled) == flatten(INVOICE)


@pytest.mark.parametrize("path, shown", [
    ("vendor_tax_id", "vendor tax id"), ("line_items.0.unit_price", "line 1 unit price"), ("odd.path", "odd.path"),
])
def test_labels(path, shown):
    assert label(path) == shown


def test_a_diff_names_changed_added_and_removed_fields_in_order():
    later = {**INVOICE, "vendor": "Someone Else Ltd", "line_items": INVOICE["line_items"][:1]}
    del later["tax"]
    changes = diff(INVOICE, later)
    assert changes[0].field == "vendor" and (changes[0].before, changes[0].after) == (INVOICE["vendor"],
                                                                                      "Someone Else Ltd")
    removed = [c.field for c in changes if c.after is None]
    assert "tax" in removed and all(c.before is not None for c in changes if c.after is None)
    assert diff(INVOICE, INVOICE) == []


def test_a_layout_tolerates_what_is_not_an_invoice():
    odd = layout({"invoice_number": "X", "line_items": ["just text"], "extra": {"nested": 1}})
    assert [c.path for c in odd.header] == ["invoice_number"]
    assert [c.path for c in odd.lines[0].cells] == ["line_items.0.description", "line_items.0.quantity",
                                                    "line_items.0.unit_price", "line_items.0.amount",
                                                    "line_items.0.value"]
    assert [(c.path, c.value) for c in odd.other] == [("extra", '{"nested": 1}')]
    assert layout(None).header == [] and rule_checks({"total": "1"}) is None


def test_every_rule_is_checked_and_named():
    checks = rule_checks({**INVOICE, "total": "0.01", "currency": "XYZ"})
    assert [c.rule for c in checks if not c.holds] == ["currency_known", "total"]


def test_a_correction_is_normalised_and_only_real_changes_count():
    final, changes = correct(INVOICE, {"total": INVOICE["total"] + "0", "vendor": " Renamed Ltd "})
    assert final["vendor"] == "Renamed Ltd" and final["total"] == INVOICE["total"]
    assert [c.field for c in changes] == ["vendor"]


def test_a_correction_refuses_values_that_are_not_text():
    with pytest.raises(CorrectionRefused) as refused:
        correct(INVOICE, {"vendor": "x" * 501})
    assert refused.value.problems == {"vendor": "must be text of at most 500 characters"}


def test_a_stored_line_that_is_not_an_object_cannot_be_corrected():
    odd = {**INVOICE, "line_items": ["just text"]}
    with pytest.raises(CorrectionRefused) as refused:
        correct(odd, {"line_items.0.value": "other text"})
    assert list(refused.value.problems) == ["line_items.0.value"]
