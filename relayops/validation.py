"""Argument checks shared by every public function: a bad value raises InvalidInputError naming the field."""

from __future__ import annotations

from relayops.errors import InvalidInputError


def check_int(field: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) within ``[low, high]``; InvalidInputError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low) or (
        high is not None and value > high
    ):
        raise InvalidInputError(field, f"must be an int{_range(low, high)}, got {value!r}")
    return value


def check_number(field: str, value: object, *, above: float | None = None, high: float | None = None) -> float:
    """``value`` as a float if it is a number (not a bool) in ``(above, high]``; InvalidInputError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or (
        above is not None and value <= above
    ) or (high is not None and value > high):
        bounds = f" in ({above:g}, {high:g}]" if above is not None and high is not None else ""
        raise InvalidInputError(field, f"must be a number{bounds}, got {value!r}")
    return float(value)


def check_text(field: str, value: object, *, max_length: int, allow_empty: bool = False) -> str:
    """``value`` if it is a printable string of at most ``max_length`` characters."""
    if not isinstance(value, str) or len(value) > max_length or not value.isprintable() or (
        not value and not allow_empty
    ):
        emptiness = "" if allow_empty else "non-empty "
        raise InvalidInputError(field, f"must be a {emptiness}printable string of at most {max_length} characters")
    return value


def _range(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""
