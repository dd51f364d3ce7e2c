"""Reprocessing every dead letter a filter matches, however many: the admin's "all N matching" and
``manage.py reprocess`` share it.

The selection is a filter (tenant, reason, date range, the caller's tenants), never a list of ids held
in memory: rows are read in id order, a chunk at a time (keyset paging), and each is reprocessed in
its own transaction through ``services.reprocess_from_dlq`` (audit, rate limit). Rows reprocessed
before are left out. When a tenant's rate limit refuses a row, that tenant's remaining rows are not
tried (one refusal is recorded, not one per row) and the report says when its limit makes room.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from django.db.models import Count, QuerySet

from dlq.audit import check_reason, operator_identity
from dlq.repeats import same_failure
from dlq.services import RowOutcome, RowResult, reprocess_one
from pipeline.clock import Clock, system_clock
from pipeline.models import DeadLetter, Job
from pipeline.reasons import DeadLetterReason
from relayops.errors import InvalidInputError
from relayops.validation import check_int
from tenancy.names import validate_tenant

CHUNK = 500


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters: of a tenant, with a reason, created in [since, until), not yet reprocessed."""

    tenant: str | None = None
    reason: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.tenant is not None:
            validate_tenant(self.tenant)
        if self.reason is not None and self.reason not in DeadLetterReason.values:
            raise InvalidInputError("reason", f"must be one of {', '.join(DeadLetterReason.values)}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, dt.datetime) or value.tzinfo is None):
                raise InvalidInputError(name, "must be a timezone-aware datetime")
        if self.since and self.until and self.since >= self.until:
            raise InvalidInputError("until", "must be after since")

    def apply(self, rows: QuerySet[DeadLetter]) -> QuerySet[DeadLetter]:
        rows = not_reprocessed(rows)
        if self.tenant is not None:
            rows = rows.filter(tenant=self.tenant)
        if self.reason is not None:
            rows = rows.filter(reason_code=self.reason)
        if self.since is not None:
            rows = rows.filter(created_at__gte=self.since)
        if self.until is not None:
            rows = rows.filter(created_at__lt=self.until)
        return rows


def not_reprocessed(rows: QuerySet[DeadLetter]) -> QuerySet[DeadLetter]:
    """Dead letters no reprocess has made a new version of (no audit entry names them)."""
    return rows.filter(reprocess_audit__isnull=True)


@dataclass(frozen=True)
class Preview:
    """What a bulk reprocess would do, before it does it."""

    total: int
    by_tenant: dict[str, int]
    by_reason: dict[str, int]
    same_failure: int  # permanent reason, same payload, extractor and model: will fail the same way


def _counts(rows: QuerySet[DeadLetter], column: str) -> dict[str, int]:
    return {row[column]: row["n"] for row in rows.order_by().values(column).annotate(n=Count("id")).order_by(column)}


def preview_of(rows: QuerySet[DeadLetter]) -> Preview:
    by_tenant = _counts(rows, "tenant")
    return Preview(
        total=sum(by_tenant.values()), by_tenant=by_tenant, by_reason=_counts(rows, "reason_code"),
        same_failure=same_failure(rows).count() if by_tenant else 0,
    )


@dataclass
class BulkReport:
    """What a bulk reprocess did: a count per row outcome, the tenants the limit stopped and when to retry."""

    results: Counter[RowResult] = field(default_factory=Counter)
    not_tried: Counter[str] = field(default_factory=Counter)  # by tenant: left after its limit refused
    retry_after_seconds: dict[str, int] = field(default_factory=dict)  # by tenant
    created: list[Job] = field(default_factory=list)  # the first new versions, for links
    details: list[str] = field(default_factory=list)  # the refusals' reasons, a few

    @property
    def reprocessed(self) -> int:
        return self.results[RowResult.REPROCESSED]


def _ids(rows: QuerySet[DeadLetter], chunk: int) -> Iterator[tuple[int, str]]:
    last = 0
    while True:
        page = list(rows.filter(pk__gt=last).order_by("pk").values_list("pk", "tenant")[:chunk])
        yield from page
        if len(page) < chunk:
            return
        last = page[-1][0]


def reprocess_matching(
    rows: QuerySet[DeadLetter], operator: object, *, reason: str = "", clock: Clock = system_clock,
    chunk: int = CHUNK, on_row: Callable[[RowOutcome | None], None] | None = None, keep_created: int = 20,
) -> BulkReport:
    """Reprocess every row of ``rows`` not reprocessed before, each in its own transaction, in id order.

    ``on_row`` is called once per row (None for a row not tried: its tenant's limit was reached), so a
    progress bar can follow. Bad arguments raise InvalidInputError before any row is tried.
    """
    check_int("chunk", chunk, low=1, high=10_000)
    operator_identity(operator)
    reason = check_reason(reason)
    report = BulkReport()
    limited: set[str] = set()
    for dead_letter_id, tenant in _ids(not_reprocessed(rows), chunk):
        if tenant in limited:
            report.not_tried[tenant] += 1
            if on_row:
                on_row(None)
            continue
        outcome = reprocess_one(dead_letter_id, tenant, operator, reason, clock)
        report.results[outcome.result] += 1
        if outcome.result == RowResult.RATE_LIMITED:
            limited.add(tenant)
            report.retry_after_seconds[tenant] = outcome.retry_after_seconds or 0
        elif outcome.result == RowResult.REPROCESSED and outcome.job is not None and len(report.created) < keep_created:
            report.created.append(outcome.job)
        elif outcome.result != RowResult.REPROCESSED and outcome.detail and len(report.details) < 5:
            report.details.append(outcome.detail)
        if on_row:
            on_row(outcome)
    return report
