"""The running totals of the measures: each sweep folds the attempts that ended, and the reviews
decided, since the last fold into ``MeasureTotal`` (a histogram per measure and tenant), so
``/metrics`` reads a few rows plus the last minutes' instead of every attempt ever.

A row is folded once it has *settled*: ``SETTLE`` after it ended (or was decided), so the values a
worker writes just after (the commit time) are there. The fold mark says up to when; the fold and
its mark move in one transaction, under a row lock, so two sweeps never fold a row twice. A reader
adds the rows settled after the mark, read in the same snapshot as the totals (``read``).

The same fold, under its own mark (``HOURS_MARK``), adds each settled row to the hourly histogram of
its measure, tenant and the hour it was taken in (``MeasureHour``), for rows taken within
``HOURLY_SPAN``, and drops the hours older than that: the dashboard's wide windows read their
percentiles from these hours plus the rows not folded yet (``console.measures``). And, under a third
mark, it rolls the metric samples of each twelve minutes over into a ``MetricSlot`` per metric, tenant
and label once the slot is over (and settled): the wide windows' series read slots, not samples. A
fourth mark counts the jobs finished (a terminal status is final, jobs are never deleted) into
``JobTotal``: ``/metrics`` counts the jobs by status from these, the jobs finished since and the live ones.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q

from pipeline import sql
from pipeline.measures import HOURLY_SPAN, Histogram, Measure, bucket_counts, groups, histograms
from pipeline.models import Job, JobTotal, MeasureHour, MeasureTotal, MetricSlot, SweepTurn
from pipeline.states import LIVE_STATUSES

MARK = "measure_totals"
HOURS_MARK = "measure_hours"
SLOTS_MARK = "metric_slots"
JOBS_MARK = "job_totals"
SLOT = 720  # seconds: a point of the 24 h window, a seventh of the 7 d window's
# The metrics a slot serves exactly: their points combine the samples by sum (throughput, refusals) or
# maximum (outbox lag), or by minimum over one row per label and instant (drains alive per node). Dead
# letters (a sum over tenants, then the highest) and the queue depth are read from their samples.
ROLLED = ("finished_per_minute", "reprocess_refusals", "outbox_lag_seconds", "drains_alive")
SETTLE = dt.timedelta(minutes=2)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _locked_mark(name: str = MARK) -> SweepTurn:
    SweepTurn.objects.get_or_create(name=name, defaults={"taken_at": EPOCH})
    return SweepTurn.objects.select_for_update().get(name=name)


def hour_start(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.timezone.utc).replace(minute=0, second=0, microsecond=0)


def slot_start(at: dt.datetime) -> dt.datetime:
    seconds = int(at.timestamp()) // SLOT * SLOT
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


ROLL_UP = f"""
INSERT INTO pipeline_metricslot (metric, tenant, label, slot, total, high, low, samples)
SELECT metric, tenant, label, date_bin('{SLOT} seconds', sampled_at, 'epoch'), SUM(value), MAX(value), MIN(value), COUNT(*)
FROM pipeline_metricsample WHERE metric IN ({", ".join(f"'{m}'" for m in ROLLED)})
  AND sampled_at >= %(after)s AND sampled_at < %(until)s GROUP BY 1, 2, 3, 4
"""


def _fold_jobs(until: dt.datetime) -> int:
    """Count the jobs that finished in (jobs mark, until] into ``JobTotal``. Returns the totals changed."""
    mark = _locked_mark(JOBS_MARK)
    if until <= mark.taken_at:
        return 0
    ended = (Job.objects.filter(finished_at__gt=mark.taken_at, finished_at__lte=until)
             .values("tenant", "status").annotate(n=Count("pk")).order_by())
    changed = 0
    for row in ended:
        total, _ = JobTotal.objects.select_for_update().get_or_create(tenant=row["tenant"], status=row["status"])
        total.count += row["n"]
        total.save(update_fields=["count"])
        changed += 1
    mark.taken_at = until
    mark.save(update_fields=["taken_at"])
    return changed


def job_counts() -> dict[tuple[str, str], int]:
    """(tenant, status) -> jobs now: the terminal ones from the totals plus those finished after their
    mark, the live ones counted, in one snapshot (a fold meanwhile neither hides nor repeats a job)."""
    repeatable = connection.vendor == "postgresql" and not connection.in_atomic_block
    with transaction.atomic():
        if repeatable:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        mark = SweepTurn.objects.filter(name=JOBS_MARK).values_list("taken_at", flat=True).first() or EPOCH
        found = {(t.tenant, t.status): t.count for t in JobTotal.objects.all()}
        recent = Job.objects.filter(Q(finished_at__gt=mark) | Q(status__in=LIVE_STATUSES))
        for row in recent.values("tenant", "status").annotate(n=Count("pk")).order_by():
            key = (row["tenant"], row["status"])
            found[key] = found.get(key, 0) + row["n"]
    return dict(sorted((key, n) for key, n in found.items() if n))


def _fold_slots(now: dt.datetime, until: dt.datetime) -> int:
    """Roll the samples of the slots over by ``until`` (since the slots mark) into ``MetricSlot``, each
    slot once, whole; drop the slots the samples' retention dropped. Returns the rows written."""
    if connection.vendor != "postgresql":  # the embedded SQLite draws every window from the samples
        return 0
    mark = _locked_mark(SLOTS_MARK)
    end = slot_start(until)
    if end <= mark.taken_at:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(ROLL_UP, {"after": mark.taken_at, "until": end})
        written = cursor.rowcount
    retention = dt.timedelta(days=settings.RELAYOPS["METRIC_SAMPLE_RETENTION_DAYS"])
    MetricSlot.objects.filter(slot__lt=now - retention - dt.timedelta(seconds=SLOT)).delete()
    mark.taken_at = end
    mark.save(update_fields=["taken_at"])
    return written


def _fold_hours(now: dt.datetime, until: dt.datetime) -> int:
    """Add the rows settled in (hours mark, until] and taken since the oldest hour kept to their hours;
    drop the older hours. Returns how many hours changed."""
    if connection.vendor != "postgresql":  # the embedded SQLite reads every window exact (console.measures)
        return 0
    mark = _locked_mark(HOURS_MARK)
    if until <= mark.taken_at:
        return 0
    keep_from = hour_start(now - HOURLY_SPAN)
    params: dict[str, object] = {"after": sql.ts(mark.taken_at), "until": sql.ts(until), "keep": sql.ts(keep_from)}
    found: dict[tuple[str, str, dt.datetime], dict[int, int]] = {}
    for group in groups():
        where = f"{group.settled} > %(after)s AND {group.settled} <= %(until)s AND {group.at} >= %(keep)s"
        for (measure, tenant, hour), counts in bucket_counts(group, [where], params, by_hour=True).items():
            found[(str(measure), tenant, dt.datetime.fromtimestamp(hour, dt.timezone.utc))] = counts
    if found:
        earliest = min(hour for _, _, hour in found)
        existing = {(row.measure, row.tenant, row.hour): row
                    for row in MeasureHour.objects.select_for_update().filter(hour__gte=earliest)}
        changed, new = [], []
        for key, counts in found.items():
            row = existing.get(key)
            if row is None:
                new.append(MeasureHour(measure=key[0], tenant=key[1], hour=key[2],
                                       counts={str(k): n for k, n in sorted(counts.items())}))
                continue
            merged = dict(row.counts)
            for k, n in counts.items():
                merged[str(k)] = merged.get(str(k), 0) + n
            row.counts = merged
            changed.append(row)
        MeasureHour.objects.bulk_create(new, batch_size=1000)
        MeasureHour.objects.bulk_update(changed, ["counts"], batch_size=1000)
    MeasureHour.objects.filter(hour__lt=keep_from).delete()
    mark.taken_at = until
    mark.save(update_fields=["taken_at"])
    return len(found)


class TotalsFolder:
    """``run_once(now)`` folds what settled in (mark, now - SETTLE] into the totals; returns how many
    (measure, tenant) totals it changed."""

    def run_once(self, now: dt.datetime) -> int:
        until = now - SETTLE
        with transaction.atomic():
            mark = _locked_mark()
            if until <= mark.taken_at:
                _fold_hours(now, until)
                _fold_slots(now, until)
                _fold_jobs(until)
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
            _fold_hours(now, until)
            _fold_slots(now, until)
            _fold_jobs(until)
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
