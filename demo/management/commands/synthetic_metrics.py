"""``synthetic_metrics``: the waiting / inference / review experiment on the real pipeline.

Twelve synthetic invoices go in through the HTTP API, drains of this process extract, validate and
commit them, the relay hands them to review, and a synthetic reviewer approves each review
``--review-delay`` seconds after its handoff. Then a table per document: queue wait and inference time
(measured), review wait (synthetic), each its own number; and the queue-depth samples taken over the
run, with their minimum and maximum. Works on the embedded SQLite and on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from demo import experiment
from relayops.errors import InvalidInputError
from tenancy.names import validate_tenant


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


class Command(BaseCommand):
    help = "Run 12 synthetic documents through ingest, extract, validate and review; print each measure apart."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--documents", type=int, default=12, help="how many synthetic invoices (default 12)")
        parser.add_argument("--tenant", default="synthetic", help="the tenant they belong to (default synthetic)")
        parser.add_argument("--interval", type=float, default=0.25, help="seconds between two arrivals")
        parser.add_argument("--review-delay", type=float, default=2.0,
                            help="the synthetic reviewer decides this many seconds after each handoff (default 2)")
        parser.add_argument("--drains", type=int, default=2, help="drains running the jobs (default 2)")
        parser.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            plan = experiment.Plan(
                tenant=validate_tenant(options["tenant"]), documents=_within("--documents", options["documents"], 1, 200),
                interval=_within("--interval", options["interval"], 0, 60),
                review_delay=_within("--review-delay", options["review_delay"], 0, 3600),
                drains=_within("--drains", options["drains"], 1, 16), timeout=_within("--timeout", options["timeout"], 1, 86400),
            )
        except InvalidInputError as exc:
            raise CommandError(str(exc)) from exc
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write(f"synthetic_metrics: {plan.documents} documents for tenant {plan.tenant}, "
                          f"{plan.drains} drains, reviews decided {plan.review_delay:g} s after handoff")
        try:
            outcome = experiment.run(plan, progress=self.stdout.write)
        except (RuntimeError, TimeoutError) as exc:
            raise CommandError(str(exc)) from exc
        self._table(outcome)
        self._depth(outcome)

    def _table(self, outcome: experiment.Outcome) -> None:
        header = ["document", "status", "queue wait [measured]", f"inference [measured: {outcome.extractor}]",
                  "commit [measured]", "review wait [synthetic]", "end to end"]
        rows = [[r.document_id, r.status, _seconds(r.queue_wait), _seconds(r.inference), _seconds(r.commit),
                 _seconds(r.review_wait), _seconds(r.end_to_end)] for r in outcome.rows]
        widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
        self.stdout.write("")
        self.stdout.write("per document (each its own number; review wait is the synthetic reviewer's delay, "
                          "read back from the stored times):")
        for line in [header, *rows]:
            self.stdout.write("  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())

    def _depth(self, outcome: experiment.Outcome) -> None:
        self.stdout.write("")
        self.stdout.write(f"queue depth samples over the run ({len(outcome.depth)}; queued / leased / due):")
        for point in outcome.depth:
            offset = (point.at - outcome.started).total_seconds()
            self.stdout.write(f"  +{offset:7.2f} s  {point.queued:4d} / {point.leased:4d} / {point.due:4d}")
        if not outcome.depth:
            self.stdout.write("  (none)")
            return
        depths = [p.queued + p.leased for p in outcome.depth]
        self.stdout.write(f"depth (queued + leased): min {min(depths)}, max {max(depths)}")


def _within(name: str, value: float, low: float, high: float) -> Any:
    if not low <= value <= high:
        raise InvalidInputError(name, f"must be between {low:g} and {high:g}, got {value:g}")
    return value
