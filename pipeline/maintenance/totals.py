"""The running totals of the measures: each sweep folds the attempts that ended, and the reviews
decided, since the last fold into ``MeasureTotal`` (a histogram per measure and tenant), so
``/metrics`` reads a few rows plus the last minutes' instead of every attempt ever.

A row is folded once it has *settled*: ``SETTLE`` after it ended (or was decided), so the values a
worker writes just after (the commit time) are there. The fold mark says up to when; the fold and
its mark move in one transaction, under a row lock, so two sweeps never fold a row twice. A reader
adds the rows settled after the mark, read in the same snapshot as the totals (``read``).
"""

from __future__ import annotations

import datetime as dt

from django.db import connection, transaction

from pipeline.measures import Histogram, Measure, groups, histograms
from pipeline.models import MeasureTotal, SweepTurn

MARK = "measure_totals"
SETTLE = dt.timedelta(minutes=2)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _locked_mark() -> SweepTurn:
    SweepTurn.objects.get_or_create(name=MARK, defaults={"taken_at": EPOCH})
    return SweepTurn.objects.select_for_update().get(name=MARK)


class TotalsFolder:
    """``run_once(now)`` folds what settled in (mark, now - SETTLE] into the totals; returns how many
    (measure, tenant) totals it changed."""

    def run_once(self, now: dt.datetime) -> int:
        until = now - SETTLE
        with transaction.atomic():
            mark = _locked_mark()
            if until <= mark.taken_at:
                return 0
            changed = 0
            for group in groups():
                for (measure, tenant), new in histograms(group, mark.taken_at, until).items():
                    total, _ = MeasureTotal.objects.select_for_update().get_or_create(measure=measure, tenant=tenant)
                    added = Histogram(total.count, total.total, list(total.buckets)).add(new)
                    total.count, total.total, total.buckets = added.count, added.total, added.buckets
                    total.save(update_fields=["count", "total", "buckets"])
                    changed += 1
            mark.taken_at = until
            mark.save(update_fields=["taken_at"])
        return changed


def read() -> dict[tuple[Measure, str], Histogram]:
    """Every observation so far, per (measure, tenant): the totals plus what settled after their mark,
    read in one snapshot (a fold meanwhile can neither hide a row nor count it twice)."""
    repeatable = connection.vendor == "postgresql" and not connection.in_atomic_block
    with transaction.atomic():
        if repeatable:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        mark = SweepTurn.objects.filter(name=MARK).values_list("taken_at", flat=True).first() or EPOCH
        found = {(Measure(t.measure), t.tenant): Histogram(t.count, t.total, list(t.buckets))
                 for t in MeasureTotal.objects.all()}
        for group in groups():
            for key, recent in histograms(group, mark, None).items():
                found[key] = found.get(key, Histogram()).add(recent)
    return dict(sorted(found.items()))
