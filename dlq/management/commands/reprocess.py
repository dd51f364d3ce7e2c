"""``reprocess --tenant T --reason R --since DATE [--until DATE] --reason-text "..." [--dry-run]``: reprocess
every dead letter the filter matches (not reprocessed before) as a new version, with a progress bar.

``--dry-run`` prints what it would do (how many, per tenant and reason, how many would fail the same way,
how many each tenant's rate limit lets through now) and writes nothing. A real run goes row by row
through the same service as the admin (audit, per-tenant rate limit); when a tenant's limit refuses, its
remaining rows are not tried, and the command says how many were done and when to run it again (a
re-run skips what is done). Exit status 1 when anything was refused or left.

The audit names ``--user`` (whose permission ``dlq.reprocess_deadletter`` and tenants then apply) or,
without it, ``manage.py:<the account running the command>``: shell access to the server is already
every tenant's database.
"""

from __future__ import annotations

import datetime as dt
import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from tqdm import tqdm

from dlq.bulk import DeadLetterFilter, preview_of, reprocess_matching
from dlq.ratelimit import room
from dlq.services import RowOutcome, RowResult
from pipeline.models import DeadLetter
from pipeline.reasons import DeadLetterReason
from relayops.errors import InvalidInputError
from relayops.formatting import counted, format_duration
from tenancy.services import scope


def moment(text: str) -> dt.datetime:
    """An ISO date (midnight UTC) or datetime (UTC unless it says otherwise)."""
    parsed = parse_datetime(text)
    if parsed is None:
        day = parse_date(text)
        if day is None:
            raise ValueError(text)
        parsed = dt.datetime.combine(day, dt.time())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _moment_arg(text: str) -> dt.datetime:
    try:
        return moment(text)
    except ValueError:
        raise CommandError(f"{text!r} is not a date (2026-03-01) or a datetime (2026-03-01T09:00)") from None


class Command(BaseCommand):
    help = "Reprocess every dead letter matching a filter as a new version (audited, rate-limited per tenant)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="only this tenant's dead letters")
        parser.add_argument("--reason", choices=DeadLetterReason.values, help="only dead letters with this reason")
        parser.add_argument("--since", type=_moment_arg, help="dead-lettered at or after (ISO date or datetime, UTC)")
        parser.add_argument("--until", type=_moment_arg, help="dead-lettered before (ISO date or datetime, UTC)")
        parser.add_argument("--reason-text", default="",
                            help="why: kept in every audit entry (required unless --dry-run)")
        parser.add_argument("--dry-run", action="store_true", help="print what would be done and write nothing")
        parser.add_argument("--user", help="act as this user: their permission and tenants apply, the audit names them")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            wanted = DeadLetterFilter(tenant=options["tenant"], reason=options["reason"], since=options["since"],
                                      until=options["until"])
        except InvalidInputError as exc:
            raise CommandError(str(exc)) from None
        operator, rows = self._operator(options["user"])
        rows = wanted.apply(rows)
        if options["dry_run"]:
            self._dry_run(rows)
            return
        if not options["reason_text"].strip():
            raise CommandError("--reason-text is required: say why, it is kept in the audit")
        total = rows.count()
        if not total:
            self.stdout.write("No dead letter matches: nothing to do.")
            return
        with tqdm(total=total, desc="reprocessing", unit="dead letter", file=self.stderr, disable=None) as bar:
            def advance(outcome: RowOutcome | None) -> None:
                bar.update(1)

            try:
                report = reprocess_matching(rows, operator, reason=options["reason_text"], on_row=advance)
            except InvalidInputError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(", ".join(f"{result.value}: {report.results[result]}" for result in RowResult))
        for detail in report.details:
            self.stderr.write(f"  {detail}")
        for tenant, wait in sorted(report.retry_after_seconds.items()):
            self.stdout.write(
                f"{tenant}: reprocess limit reached; "
                f"{counted(report.not_tried[tenant], 'more dead letter')} not tried. "
                f"Run this again in {format_duration(dt.timedelta(seconds=wait))} (done ones are skipped), or have "
                "the limit raised in the admin's tenant controls."
            )
        refused = sum(n for result, n in report.results.items() if result != RowResult.REPROCESSED)
        if refused or sum(report.not_tried.values()):
            raise CommandError(f"{report.reprocessed} of {total} reprocessed; the rest were refused or left")

    def _operator(self, username: str | None) -> tuple[object, Any]:
        rows = DeadLetter.objects.all()
        if not username:
            return f"manage.py:{getpass.getuser()}", rows
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        if not user.has_perm("dlq.reprocess_deadletter"):
            raise CommandError(f"{username} may not reprocess dead letters (permission dlq.reprocess_deadletter)")
        return user, scope(rows, user)

    def _dry_run(self, rows: Any) -> None:
        seen = preview_of(rows)
        self.stdout.write(f"Dry run: nothing is written. {counted(seen.total, 'dead letter')} would be reprocessed.")
        for reason, n in seen.by_reason.items():
            self.stdout.write(f"  reason {reason}: {n}")
        now = timezone.now()
        for tenant, n in seen.by_tenant.items():
            policy, fits = room(tenant, now)
            self.stdout.write(f"  tenant {tenant}: {n}; its limit ({policy.limit} per "
                              f"{format_duration(policy.window)}) lets {min(fits, n)} through now")
        if seen.same_failure:
            self.stdout.write(
                f"Warning: {counted(seen.same_failure, 'dead letter')} failed for a permanent reason with the "
                "extractor and model configured now, on the same document: reprocessed, "
                f"{'it' if seen.same_failure == 1 else 'they'} will fail the same way.")
