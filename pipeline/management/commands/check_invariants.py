"""``check_invariants``: prove from the rows that no job was lost and no effect doubled. Exit 0 if every
invariant holds, 1 if any is broken (the report names it, counts the rows and shows a few ids).

Read-only and bounded (one snapshot, a statement timeout), so operators and auditors can run it
against production while the cluster works (pipeline.invariants).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from pipeline.invariants import Report, check_all
from tenancy.names import validate_tenant

AGO = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(value: str) -> dt.datetime:
    """``2026-03-01``, ``2026-03-01T09:00:00+00:00`` or a span back from now: ``90m``, ``24h``, ``7d``."""
    if match := AGO.match(value):
        return timezone.now() - dt.timedelta(**{UNITS[match[2]]: int(match[1])})
    moment = parse_datetime(value)
    if moment is None and (day := parse_date(value)) is not None:
        moment = dt.datetime.combine(day, dt.time())
    if moment is None:
        raise CommandError(f"--since {value!r}: give a date, a datetime or a span such as 24h or 7d")
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, dt.timezone.utc)


def render(report: Report) -> str:
    width = max(len(f.check) for f in report.findings)
    lines = [f"RelayOps invariants over {report.jobs} jobs ({report.seconds:.2f} s)", ""]
    for f in report.findings:
        verdict = "ok" if not f.broken else f"BROKEN by {f.broken} row(s), e.g. id {', '.join(map(str, f.sample))}"
        lines.append(f"  {'FAIL' if f.broken else 'ok  '} {f.check.ljust(width)}  {f.promise} [{f.seconds:.2f} s]")
        if f.broken:
            lines.append(f"       {verdict}")
    lines += ["", "verdict: every invariant holds" if report.holds else "verdict: BROKEN"]
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Check RelayOps' invariants (no job lost, no effect doubled); exit 1 if any is broken."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default=None, help="only this tenant's jobs")
        parser.add_argument("--since", default=None, help="only jobs created since: a date, a datetime, or 24h / 7d")
        parser.add_argument("--timeout", type=float, default=60.0, help="statement timeout in seconds (default 60)")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = options["tenant"]
        if tenant is not None:
            try:
                validate_tenant(tenant)
            except ValueError as exc:
                raise CommandError(f"--tenant: {exc}") from exc
        since = parse_since(options["since"]) if options["since"] else None
        if not 0 < options["timeout"] <= 3600:
            raise CommandError("--timeout must be in (0, 3600] seconds")
        try:
            report = check_all(tenant=tenant, since=since, statement_timeout_seconds=options["timeout"])
        except DatabaseError as exc:
            raise CommandError(f"could not check: {type(exc).__name__} (a statement timeout? raise --timeout, "
                               "or narrow with --tenant / --since)", returncode=2) from exc
        self.stdout.write(render(report))
        if not report.holds:
            raise CommandError("invariants broken", returncode=1)
