"""The demo's scenarios: synthetic invoices for two tenants, each showing one behaviour.

The documents go in through the front door (the HTTP API, ``demo.frontdoor``); the three behaviours
a flaky model shows (failing twice, failing past a deadline, a long extraction) are simulated by the
rules extractor, so they are enqueued in-process with their ``simulate`` instructions, which the API
never accepts from a client.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pipeline import queue
from pipeline.extraction import synthetic
from pipeline.models import Job
from pipeline.reasons import ValidationRule

TENANTS = ("acme", "globex")


@dataclass(frozen=True)
class DemoInvoice:
    tenant: str
    document_id: str
    expect: str  # what the demo shows: succeeded, dead-lettered by rule, cancelled, ...
    outcome: str  # the job's final status
    text: str
    simulate: dict[str, Any] | None = None  # in-process only: the rules extractor's simulated model
    max_attempts: int = 3
    deadline: dt.timedelta | None = None

    @property
    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"text": self.text, "metadata": {}}
        return {**payload, "simulate": self.simulate} if self.simulate else payload


def _valid(tenant: str, number: int, expect: str = "succeeded") -> DemoInvoice:
    return DemoInvoice(tenant, f"INV-{number}", expect, "succeeded", synthetic.valid(f"demo-{tenant}-{number}").text)


def front_door() -> list[DemoInvoice]:
    """The documents the demo ingests through the HTTP API."""
    return [
        *(_valid("acme", 1000 + n) for n in range(1, 6)),
        *(_valid("globex", 3000 + n) for n in range(1, 3)),
        _valid("globex", 1001, "succeeded (the same document id as acme's INV-1001: no conflict)"),
        DemoInvoice("acme", "INV-2001", "dead-lettered: validation_failed, rule total (total != subtotal + tax)",
                    "dead_lettered", synthetic.failing(ValidationRule.TOTAL, "demo").text),
        DemoInvoice("acme", "INV-2003", "dead-lettered: document_malformed (no total line)", "dead_lettered",
                    synthetic.malformed(synthetic.Malformed.NO_TOTAL, "demo").text),
    ]


def simulated() -> list[DemoInvoice]:
    """What a flaky model does, simulated by the rules extractor (skipped when an LLM extracts)."""
    return [
        DemoInvoice("acme", "INV-2002", "retried twice, then succeeded (model unavailable)", "succeeded",
                    synthetic.valid("demo-2002").text, {"transient_failures": 2}),
        DemoInvoice("globex", "INV-3003", "cancelled (3 s deadline, keeps failing)", "cancelled",
                    synthetic.valid("demo-3003").text, {"transient_failures": 9}, max_attempts=10,
                    deadline=dt.timedelta(seconds=3)),
        DemoInvoice("globex", "INV-3004", "succeeded after a 5 s extraction (lease heartbeats)", "succeeded",
                    synthetic.valid("demo-3004").text, {"work_seconds": 5}),
    ]


def one_more() -> DemoInvoice:
    """The invoice the printed curl line ingests."""
    return _valid("acme", 1099)


def seed_simulated() -> list[tuple[DemoInvoice, Job, bool]]:
    """Enqueue the simulated scenarios (idempotent: a second run finds the same jobs)."""
    return [
        (item, *queue.enqueue(item.tenant, item.document_id, 1, item.payload, max_attempts=item.max_attempts,
                              deadline=item.deadline))
        for item in simulated()
    ]
