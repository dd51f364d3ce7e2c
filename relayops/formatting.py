"""How durations, ages and counts read on every page and in every command."""

from __future__ import annotations

import datetime as dt


def format_duration(delta: dt.timedelta) -> str:
    """A short human duration: 45 s, 12 min, 3 h 5 min, 2 d 4 h."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 3600:
        return f"{minutes} min"
    if seconds < 86400:
        return f"{hours} h {minutes % 60} min" if minutes % 60 else f"{hours} h"
    return f"{days} d {hours % 24} h" if hours % 24 else f"{days} d"


def counted(n: int, singular: str, plural: str = "") -> str:
    """``1 review``, ``2 reviews``: a number with its noun in the right number."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"
