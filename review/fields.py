"""An invoice's fields as the review page shows, compares and corrects them.

A field is named by its path: ``vendor``, ``line_items.0.amount`` (line items count from 0). The page
lays the fields out as an invoice (``layout``), checks them against the named validation rules
(``rule_checks``), compares two versions' results field by field (``diff``) and turns a reviewer's
edited values into the corrected fields (``correct``): the same schema and rules as the extractor's
output, normalised the same way, or a refusal naming each field (never its value).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pydantic

from pipeline.errors import PermanentError, ValidationFailed
from pipeline.extraction.invoice import InvoiceFields
from pipeline.extraction.validation import RULES, validate_invoice
from relayops.errors import InvalidInputError

HEADER = ("invoice_number", "vendor", "vendor_tax_id", "issue_date", "due_date", "currency")
TOTALS = ("subtotal", "tax", "total")
LINE_COLUMNS = ("description", "quantity", "unit_price", "amount")
LINES = "line_items"
MAX_VALUE_LENGTH = 500  # the longest text field of the schema (a line's description)


def label(path: str) -> str:
    """A field's name as people read it: ``line 1 amount`` for ``line_items.0.amount``."""
    parts = path.split(".")
    if len(parts) == 3 and parts[0] == LINES and parts[1].isdigit():
        return f"line {int(parts[1]) + 1} {parts[2].replace('_', ' ')}"
    return path.replace("_", " ")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def flatten(data: Any) -> dict[str, str]:
    """Every field of a result as ``path -> text``, in the invoice's order (header, lines, totals,
    anything else). Not a dict: nothing (a result that is not an object has no fields)."""
    if not isinstance(data, dict):
        return {}
    flat: dict[str, str] = {}
    for name in HEADER:
        if name in data:
            flat[name] = _text(data[name])
    lines = data.get(LINES)
    if isinstance(lines, list):
        for index, line in enumerate(lines):
            items = _in_order(line, LINE_COLUMNS) if isinstance(line, dict) else [("value", line)]
            for key, value in items:
                flat[f"{LINES}.{index}.{key}"] = _text(value)
    for name in TOTALS:
        if name in data:
            flat[name] = _text(data[name])
    for name, value in sorted(data.items()):  # JSON objects keep no order in the database
        if name not in flat and (name != LINES or not isinstance(lines, list)):
            flat[name] = _text(value) if not isinstance(value, (dict, list)) else _json(value)
    return flat


def _in_order(mapping: dict[str, Any], first: tuple[str, ...]) -> list[tuple[str, Any]]:
    """A mapping's items, the ``first`` keys in their order, then the rest sorted by name."""
    return [(key, mapping[key]) for key in first if key in mapping] + sorted(
        (key, value) for key, value in mapping.items() if key not in first)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Change:
    field: str
    before: str | None  # None: the field did not exist
    after: str | None

    @property
    def label(self) -> str:
        return label(self.field)

    def as_json(self, before: str = "extracted", after: str = "corrected") -> dict[str, Any]:
        return {"field": self.field, before: self.before, after: self.after}


def diff(before: Any, after: Any) -> list[Change]:
    """The fields that differ between two results, in the invoice's order (the later one's, then fields
    only the earlier one had)."""
    old, new = flatten(before), flatten(after)
    order = list(new) + [path for path in old if path not in new]
    return [Change(path, old.get(path), new.get(path)) for path in order if old.get(path) != new.get(path)]


@dataclass(frozen=True)
class Cell:
    path: str
    label: str
    value: str
    error: str = ""  # what is wrong with a reviewer's value (never the value)
    extracted: str = ""  # the stored value, to mark a field the reviewer changed

    @property
    def changed(self) -> bool:
        return self.value != self.extracted


@dataclass(frozen=True)
class Line:
    index: int
    cells: list[Cell]


@dataclass(frozen=True)
class InvoiceLayout:
    header: list[Cell] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    columns: tuple[str, ...] = LINE_COLUMNS
    totals: list[Cell] = field(default_factory=list)
    other: list[Cell] = field(default_factory=list)  # fields outside the invoice schema

    @property
    def column_labels(self) -> list[str]:
        return [name.replace("_", " ") for name in self.columns]


def layout(data: Any, values: dict[str, str] | None = None, errors: dict[str, str] | None = None) -> InvoiceLayout:
    """The fields as an invoice: header fields, line items, totals, and whatever else the result holds.
    ``values`` (a reviewer's, by path) replace the stored ones; ``errors`` mark what was wrong with them."""
    flat = flatten(data)
    values, errors = values or {}, errors or {}

    def cell(path: str) -> Cell:
        stored = flat.get(path, "")
        return Cell(path, label(path), values.get(path, stored), errors.get(path, ""), stored)

    header = [cell(p) for p in HEADER if p in flat]
    totals = [cell(p) for p in TOTALS if p in flat]
    lines_data = data.get(LINES) if isinstance(data, dict) else None
    lines: list[Line] = []
    columns: tuple[str, ...] = LINE_COLUMNS
    if isinstance(lines_data, list):
        keys = list(LINE_COLUMNS)
        for line in lines_data:
            if isinstance(line, dict):
                keys += [key for key in sorted(line) if key not in keys]
            elif "value" not in keys:  # a line that is not an object: shown whole (flatten names it "value")
                keys.append("value")
        columns = tuple(keys)
        lines = [Line(index, [cell(f"{LINES}.{index}.{key}") for key in columns]) for index in range(len(lines_data))]
    shown = {c.path for c in header + totals}
    other = [cell(p) for p in flat if p not in shown and not p.startswith(f"{LINES}.")]
    return InvoiceLayout(header=header, lines=lines, columns=columns, totals=totals, other=other)


@dataclass(frozen=True)
class RuleCheck:
    rule: str  # the rule's code (pipeline.reasons.ValidationRule)
    holds: bool


def rule_checks(data: Any) -> list[RuleCheck] | None:
    """Each named validation rule and whether ``data`` keeps it; None when ``data`` is not an invoice of
    the schema (the rules cannot be read then)."""
    try:
        invoice = InvoiceFields.model_validate(data)
    except pydantic.ValidationError:
        return None
    return [RuleCheck(str(rule), bool(holds(invoice))) for rule, holds in RULES]


class CorrectionRefused(InvalidInputError):
    """The corrected values are not a valid invoice. ``problems`` maps each field path to what is wrong
    with it (never its value); ``rules`` names the validation rules the values break."""

    def __init__(self, problems: dict[str, str], rules: list[str]) -> None:
        self.problems = problems
        self.rules = rules
        parts = [f"{label(p)}: {problem}" for p, problem in problems.items()]
        parts += [f"the values break the rule {rule}" for rule in rules]
        super().__init__("values", "; ".join(parts))


def _set(data: dict[str, Any], path: str, value: str) -> None:
    parts = path.split(".")
    if len(parts) == 3 and parts[0] == LINES:
        line = data[LINES][int(parts[1])]
        if not isinstance(line, dict):  # a stored line that is not an object: nothing to correct in it
            raise CorrectionRefused({path: "cannot be corrected: this line is not an invoice line"}, [])
        line[parts[2]] = value
    else:
        data[path] = value


def _problem(error: dict[str, Any]) -> str:
    kind = str(error.get("type", ""))
    if kind.startswith("decimal") or kind in ("float_parsing", "int_parsing"):
        return "must be a number (at most 6 decimal places)"
    if kind in ("string_too_short", "missing"):
        return "is required"
    if kind == "string_too_long":
        return "is too long"
    return "is not valid here"


def correct(extracted: Any, submitted: dict[str, str]) -> tuple[dict[str, Any], list[Change]]:
    """The corrected fields and what changed, from the extracted fields and the reviewer's values by path.

    Only the extracted fields can be edited (no line is added or removed); a path not given keeps its
    extracted value. The result passes the same schema and rules as an extractor's output and is
    normalised the same way (money as ``"12.50"``), so ``12.5`` for ``12.50`` is no change. Raises
    CorrectionRefused naming every bad field and broken rule, InvalidInputError when nothing changed.
    """
    if not isinstance(extracted, dict):
        raise InvalidInputError("values", "this result has no fields to correct")
    known = flatten(extracted)
    unknown = sorted(set(submitted) - set(known))
    if unknown:
        raise CorrectionRefused({path: "is not a field of this result" for path in unknown[:10]}, [])
    candidate = copy.deepcopy(extracted)
    for path, value in submitted.items():
        if not isinstance(value, str) or len(value) > MAX_VALUE_LENGTH or "\x00" in value:
            raise CorrectionRefused({path: f"must be text of at most {MAX_VALUE_LENGTH} characters"}, [])
        if value != known[path]:
            _set(candidate, path, value)
    try:
        invoice = InvoiceFields.model_validate(candidate)
    except pydantic.ValidationError as exc:
        problems = {".".join(str(part) for part in error["loc"]): _problem(dict(error)) for error in exc.errors()}
        raise CorrectionRefused(problems, []) from None  # its text quotes the values: not kept
    broken = [str(rule) for rule, holds in RULES if not holds(invoice)]
    if broken:
        raise CorrectionRefused({}, broken)
    try:
        final = validate_invoice(candidate)
    except (PermanentError, ValidationFailed):  # checked above; the schema's own normalisation agrees
        raise CorrectionRefused({}, ["schema"]) from None
    changes = diff(extracted, final)
    if not changes:
        raise InvalidInputError("values", "no field was changed: approve instead")
    return final, changes
