"""The review page's render time: p50 and p95 over ``--renders`` requests, and its queries.

Usage: ./run bench review_page [--renders 200] [--background 1000] [--lines 50] [--versions 5]
    [--db relayops_bench_review]
Creates the benchmark database on the DATABASE_URL server and fills it through the services (enqueue,
the worker, the relay): ``--background`` pending reviews of synthetic invoices (one to five line items,
the rules extractor) in the operator's tenant and another, and one document with ``--versions``
versions of ``--lines`` line items each. Then, as an operator with Django's test client (DEBUG off, the
production middleware and templates), it requests three review pages ``--renders`` times each after a
warm-up: a typical pending invoice, the large document's last version (its diff with the version
before), and a decided (corrected) review. Each request is timed whole: middleware, session, the
view's queries, the template. Prints p50, p95 and max (nearest rank), the queries of one request, and
the page's size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import statistics
import time
from decimal import Decimal
from typing import Any

from benchdb import fresh_database  # bench/ is on sys.path when run as a script

TENANT, OTHER = "acme", "globex"


def _setup(db: str) -> None:
    hosts = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
    fresh_database(db, DEBUG="0", ALLOWED_HOSTS=f"{hosts},testserver")


def _fields(lines: int, version: int) -> dict[str, Any]:
    items = [{"description": f"Part {n}, revision {version if n % 7 == 0 else 1}", "quantity": "2",
              "unit_price": "12.5", "amount": "25.00"} for n in range(1, lines + 1)]
    subtotal = Decimal(25 * lines)
    return {
        "invoice_number": f"INV-2026-{version:05d}", "issue_date": "2026-02-14", "due_date": "2026-03-16",
        "vendor": "Globex Supplies Ltd", "vendor_tax_id": "GB123456789", "currency": "GBP", "line_items": items,
        "subtotal": f"{subtotal:.2f}", "tax": f"{subtotal / 5:.2f}", "total": f"{subtotal * 6 / 5:.2f}",
    }


def _text(fields: dict[str, Any]) -> str:
    rows = [f"{i['description']:<44}{i['quantity']:>6}{i['unit_price']:>14}{i['amount']:>14}" for i in fields["line_items"]]
    return "\n".join([fields["vendor"], f"VAT ID: {fields['vendor_tax_id']}", "", "INVOICE",
                      f"Invoice number: {fields['invoice_number']}", f"Issue date: {fields['issue_date']}",
                      f"Due date: {fields['due_date']}", f"Currency: {fields['currency']}", "",
                      f"{'Description':<44}{'Qty':>6}{'Unit price':>14}{'Amount':>14}", *rows, "",
                      f"Subtotal: {fields['subtotal']}", f"VAT (20%): {fields['tax']}", f"Total: {fields['total']}"])


def _seed(background: int, lines: int, versions: int) -> dict[str, int]:
    from pipeline import queue, relay
    from pipeline.extraction import synthetic
    from pipeline.extraction.document import Extraction, Usage
    from pipeline.models import Review
    from pipeline.worker import process_once

    started = time.perf_counter()
    for n in range(background):
        invoice = synthetic.valid(f"bench-{n}")
        queue.enqueue(TENANT if n % 4 else OTHER, invoice.document_id, 1, invoice.payload)
        assert process_once("bench").outcome == "committed"
    big = None
    for version in range(1, versions + 1):
        found = _fields(lines, version)
        big, _ = queue.enqueue(TENANT, "large-invoice", version, {"text": _text(found), "metadata": {}})

        def extractor(document: Any, checkpoint: Any, found: dict[str, Any] = found) -> Extraction:
            return Extraction(found, Usage(model="bench-model", input_tokens=4000, output_tokens=900))

        assert process_once("bench", extractor=extractor).outcome == "committed"
    while relay.publish_pending().claimed:
        pass
    print(f"seeded {background:,} reviews and a {lines}-line document in {versions} versions "
          f"in {time.perf_counter() - started:.0f} s", flush=True)
    assert big is not None
    typical = Review.objects.filter(tenant=TENANT, document_id__startswith="invoice-").order_by("id")[background // 8]
    corrected = Review.objects.filter(tenant=TENANT, document_id__startswith="invoice-").order_by("id")[background // 4]
    return {"typical pending": typical.pk, f"{lines} lines, v{versions} (diff)": Review.objects.get(job=big).pk,
            "decided (corrected)": corrected.pk}


def _measure(client: Any, review_id: int, renders: int) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    url = reverse("admin:review_page", args=[review_id])
    assert client.get(url).status_code == 200  # warm-up: caches, the session, the first plans
    times = []
    for _ in range(renders):
        began = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    times.sort()
    return {"p50": statistics.median(times), "p95": times[math.ceil(0.95 * len(times)) - 1], "max": times[-1],
            "queries": len(captured), "kb": len(response.content) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=200)
    parser.add_argument("--background", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=50)
    parser.add_argument("--versions", type=int, default=5)
    parser.add_argument("--db", default="relayops_bench_review")
    args = parser.parse_args()

    started = time.perf_counter()
    _setup(args.db)
    from django.test import Client

    from review.decisions import decide
    from tenancy.roles import ensure_roles
    from tenancy.services import create_member

    ensure_roles()
    operator = create_member("bench-operator", [TENANT]).user
    pages = _seed(args.background, args.lines, args.versions)
    decide(pages["decided (corrected)"], "correct", operator, values={"vendor": "Globex Supplies Limited"})
    client = Client()
    client.force_login(operator)
    print(f"rendering {len(pages)} review pages {args.renders} times each after a warm-up "
          f"({dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs) ...", flush=True)
    print(f"\n{'review page':<26} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'queries':>8} {'size KB':>8}")
    for label, review_id in pages.items():
        m = _measure(client, review_id, args.renders)
        print(f"{label:<26} {m['p50']:8.1f} {m['p95']:8.1f} {m['max']:8.1f} {m['queries']:>8} {m['kb']:8.1f}", flush=True)
    print(f"\ntotal run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
