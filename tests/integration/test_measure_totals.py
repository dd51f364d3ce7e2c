"""The running totals /metrics exposes: each sweep folds the attempts and reviews that settled since the
last fold; the totals plus the rows since the mark always equal a count over every row, before and after
a fold, and a fold never counts a row twice."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model

from pipeline import queue, relay, reviews
from pipeline.maintenance import totals
from pipeline.maintenance.sweeper import Sweeper
from pipeline.maintenance.totals import SETTLE, TotalsFolder
from pipeline.measures import Histogram, Measure, groups, histograms
from pipeline.models import MeasureTotal, Review, ReviewStatus
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


def _everything() -> dict:
    found: dict = {}
    for group in groups():
        found.update(histograms(group, None, None))
    return dict(sorted(found.items()))


def _run(clock, tenant: str, n: int, wait: float) -> None:
    queue.enqueue(tenant, f"doc-{n}", 1, invoice(n), clock=clock)
    clock.advance(wait)
    assert process_once("w1", clock=clock).outcome == "committed"


def test_totals_plus_the_tail_equal_every_row_before_and_after_each_fold(clock):
    user = get_user_model().objects.create_user("rita", password="x-long-password-1")
    _run(clock, "acme", 1, 0.02)
    _run(clock, "globex", 2, 3)
    relay.publish_pending(clock=clock)
    clock.advance(40)
    for review in Review.objects.all():
        reviews.decide_review(review.pk, ReviewStatus.APPROVED, user, clock=clock)
    assert totals.read() == _everything()  # nothing folded yet: all of it is the tail

    clock.advance(SETTLE.total_seconds() + 1)
    assert TotalsFolder().run_once(clock.now()) == 10  # (3 attempt + 2 review measures) x 2 tenants
    assert MeasureTotal.objects.get(measure=Measure.QUEUE_WAIT, tenant="globex").count == 1
    assert totals.read() == _everything()

    _run(clock, "acme", 3, 7)  # ended after the mark: read from the rows
    assert totals.read() == _everything()
    assert TotalsFolder().run_once(clock.now()) == 0  # not settled yet: nothing moves
    assert TotalsFolder().run_once(clock.now() + SETTLE + dt.timedelta(seconds=1)) == 3
    assert TotalsFolder().run_once(clock.now() + SETTLE + dt.timedelta(seconds=1)) == 0  # folded once only
    assert totals.read() == _everything()
    acme = totals.read()[(Measure.QUEUE_WAIT, "acme")]
    assert acme.count == 2 and acme.total == pytest.approx(7.02)
    assert acme.buckets[4] == 1  # 0.02 s is at or under 0.1 s; 7 s is not


def test_the_sweeper_folds(clock):
    _run(clock, "acme", 1, 1)
    report = Sweeper.from_settings().run_once(clock.now() + SETTLE + dt.timedelta(minutes=1))
    assert report.totals_folded == 3
    assert MeasureTotal.objects.filter(tenant="acme").count() == 3


def test_histograms_add_up():
    one = Histogram(2, 1.5, [1, 2])
    assert one.add(Histogram()) == one == Histogram().add(one)
    assert one.add(Histogram(1, 0.5, [1, 1])) == Histogram(3, 2.0, [2, 3])


def test_job_counts_from_the_totals_equal_a_count_of_every_job_before_and_after_each_fold(clock):
    from django.db.models import Count

    from pipeline.models import Job, JobTotal

    def counted() -> dict:
        rows = Job.objects.values("tenant", "status").annotate(n=Count("pk")).order_by()
        return dict(sorted(((r["tenant"], r["status"]), r["n"]) for r in rows))

    _run(clock, "acme", 1, 0.5)
    _run(clock, "globex", 2, 1)
    queue.enqueue("acme", "waiting", 1, invoice(3), clock=clock)
    queue.enqueue("acme", "cancelled", 1, invoice(4), clock=clock)
    queue.cancel(Job.objects.get(document_id="cancelled").pk, clock=clock)
    assert totals.job_counts() == counted()  # nothing folded: every job counted
    clock.advance(SETTLE.total_seconds() + 1)
    TotalsFolder().run_once(clock.now())
    assert JobTotal.objects.exists()
    assert totals.job_counts() == counted()
    _run(clock, "acme", 5, 0.1)  # finished after the mark
    assert totals.job_counts() == counted()
    TotalsFolder().run_once(clock.now())  # not settled: stays after the mark
    TotalsFolder().run_once(clock.now() + SETTLE + dt.timedelta(seconds=1))
    TotalsFolder().run_once(clock.now() + SETTLE + dt.timedelta(seconds=1))  # folded once only
    assert totals.job_counts() == counted()
    assert sum(t.count for t in JobTotal.objects.all()) == Job.objects.exclude(finished_at=None).count()
