"""Per-tenant reprocess rate limit. Placeholder until the admin issue: always allows."""

from __future__ import annotations

import datetime as dt


def check_reprocess_allowed(tenant: str, now: dt.datetime, *, operator: str) -> None:
    return None
