"""Reviews to decide, made through the services: a document's version processed by an extractor that
returns the fields given, its event published so its review exists."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pipeline import queue, relay
from pipeline.clock import Clock, system_clock
from pipeline.extraction.document import Extraction, Usage
from pipeline.models import Review
from pipeline.worker import process_once

TEXT = "INVOICE\nInvoice number: INV-7\nVendor: Globex Supplies Ltd\n(the document text a reviewer reads)\n"


def fields(lines: int = 2, *, vendor: str = "Globex Supplies Ltd", number: str = "INV-7") -> dict[str, Any]:
    """Valid invoice fields with ``lines`` line items of 10.00 each and 20% tax."""
    subtotal = Decimal(10 * lines)
    tax = subtotal / 5
    return {
        "invoice_number": number, "issue_date": "2026-02-14", "due_date": "2026-03-16", "vendor": vendor,
        "vendor_tax_id": "GB123456789", "currency": "GBP",
        "line_items": [{"description": f"Item {n}", "quantity": "1", "unit_price": "10", "amount": "10.00"}
                       for n in range(1, lines + 1)],
        "subtotal": f"{subtotal:.2f}", "tax": f"{tax:.2f}", "total": f"{subtotal + tax:.2f}",
    }


def review_of(tenant: str, document_id: str, data: dict[str, Any] | None = None, *, version: int = 1,
              text: str = TEXT, clock: Clock = system_clock, model: str = "fake-model-1",
              validate: bool = True) -> Review:
    """A pending review of ``tenant``'s ``document_id`` at ``version`` whose result is ``data`` (stored as
    given, without validation, when ``validate`` is False: another extractor's or an older schema's)."""
    job, _ = queue.enqueue(tenant, document_id, version, {"text": text, "n": version}, clock=clock)
    found = fields() if data is None else data

    def extractor(document: Any, checkpoint: Any) -> Extraction:
        return Extraction(found, Usage(model=model, input_tokens=1200, output_tokens=300))

    options: dict[str, Any] = {} if validate else {"validator": lambda found: found}
    outcome = process_once("w-test", extractor=extractor, clock=clock, **options)
    assert (outcome.outcome, outcome.job_id) == ("committed", job.pk), "another job was claimable first"
    relay.publish_pending(clock=clock)
    return Review.objects.select_related("job").get(job=job)
