"""The demo's scenarios: a dozen synthetic invoices for two tenants, each showing one behaviour."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pipeline import queue
from pipeline.models import Job

TENANTS = ("acme", "globex")
TEXT = "INVOICE NO: {number}\nDATE: 2026-02-{day:02d}\nVENDOR: {vendor}\nTOTAL: {total} EUR\n"


@dataclass(frozen=True)
class DemoInvoice:
    tenant: str
    document_id: str
    expect: str  # what the demo shows: succeeded, retried, dead_lettered, cancelled, shared id, ...
    payload: dict[str, Any]
    max_attempts: int = 3
    deadline: dt.timedelta | None = None


def _text(number: str, day: int, vendor: str, total: str) -> str:
    return TEXT.format(number=number, day=day, vendor=vendor, total=total)


def invoices() -> list[DemoInvoice]:
    clean = [
        DemoInvoice("acme", f"INV-10{n:02d}", "succeeded", {"text": _text(f"INV-10{n:02d}", n, "Globex Supplies", f"{120 + n}.50")})
        for n in range(1, 6)
    ] + [
        DemoInvoice("globex", f"INV-30{n:02d}", "succeeded", {"text": _text(f"INV-30{n:02d}", n, "Initech", f"{80 + n}.00")})
        for n in range(1, 3)
    ]
    return clean + [
        DemoInvoice("globex", "INV-1001", "succeeded (same document id as acme's INV-1001)",
                    {"text": _text("G-1001", 3, "Acme Corp", "999.99")}),
        DemoInvoice("acme", "INV-2001", "dead-lettered (malformed: no total)",
                    {"text": "INVOICE NO: INV-2001\nDATE: 2026-02-20\nVENDOR: Umbrella\n"}),
        DemoInvoice("acme", "INV-2002", "retried twice, then succeeded (model unavailable)",
                    {"text": _text("INV-2002", 21, "Hooli", "42.00"), "simulate": {"transient_failures": 2}}),
        DemoInvoice("globex", "INV-3003", "cancelled (3 s deadline, keeps failing)",
                    {"text": _text("INV-3003", 22, "Vandelay", "13.37"), "simulate": {"transient_failures": 9}},
                    max_attempts=10, deadline=dt.timedelta(seconds=3)),
        DemoInvoice("globex", "INV-3004", "succeeded after a 5 s extraction (lease heartbeats)",
                    {"text": _text("INV-3004", 23, "Stark Industries", "1200.00"), "simulate": {"work_seconds": 5}}),
    ]


def seed() -> list[tuple[DemoInvoice, Job, bool]]:
    """Enqueue every demo invoice (idempotent: a second run finds the same jobs)."""
    return [
        (item, *queue.enqueue(item.tenant, item.document_id, 1, item.payload, max_attempts=item.max_attempts,
                              deadline=item.deadline))
        for item in invoices()
    ]
