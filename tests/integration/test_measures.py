"""The measures kept apart, stored per attempt and per review: queue wait (due -> leased), inference time,
commit time, review wait and end to end; the percentiles the dashboard prints equal PostgreSQL's."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from django.contrib.auth import get_user_model

from console import measures
from console.measures import Measure
from pipeline import queue, relay, reviews, sql
from pipeline.models import Attempt, Job, Review, ReviewStatus
from pipeline.processing import Outcome
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


def test_an_attempt_keeps_its_queue_wait_inference_and_commit_time_apart(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(1), clock=clock)
    clock.advance(7)  # waits in line for 7 s
    outcome = process_once("w1", clock=clock)
    assert outcome.outcome == Outcome.COMMITTED
    attempt = Attempt.objects.get(job=job)
    assert attempt.tenant == "acme"
    assert attempt.due_at == job.visible_at
    assert attempt.queue_wait_seconds == 7.0
    assert attempt.inference_seconds is not None and 0 <= attempt.inference_seconds < 5
    assert attempt.commit_seconds is not None and 0 < attempt.commit_seconds < 5
    # queue wait is its own number: the frozen clock did not move during extraction or commit
    assert attempt.ended_at == attempt.leased_at


def test_a_takeover_waits_from_the_expiry_of_the_lease_it_takes_over(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(1), clock=clock)
    first = queue.lease_next("w1", lease_seconds=30, clock=clock)
    assert first is not None and first.queue_wait_seconds == 0.0
    clock.advance(45)  # the lease ran out 15 s ago
    second = queue.lease_next("w2", lease_seconds=30, clock=clock)
    assert second is not None and second.fence == first.fence + 1
    assert second.queue_wait_seconds == 15.0
    row = Attempt.objects.get(job=job, fence=second.fence)
    assert row.due_at == first.lease_until and row.queue_wait_seconds == 15.0


def test_a_retry_waits_from_its_backoff_not_from_the_enqueue(clock):
    job, _ = queue.enqueue("acme", "a", 1, invoice(1), clock=clock)
    lease = queue.lease_next("w1", clock=clock)
    clock.advance(2)
    queue.nack(lease, TimeoutError("slow"), clock=clock, rng=random.Random(1))
    visible_at = Job.objects.get(pk=job.pk).visible_at
    clock.advance((visible_at - clock.now()).total_seconds() + 3)
    retry = queue.lease_next("w1", clock=clock)
    assert retry is not None and retry.attempt == 2
    assert Attempt.objects.get(job=job, fence=retry.fence).queue_wait_seconds == 3.0


def test_review_wait_and_end_to_end_are_kept_from_the_stored_times(clock):
    user = get_user_model().objects.create_user("rita", password="x-long-password-1")
    job, _ = queue.enqueue("acme", "a", 1, invoice(1), clock=clock)
    clock.advance(2)
    process_once("w1", clock=clock)
    clock.advance(1)
    relay.publish_pending(clock=clock)  # the handoff: the review is created
    clock.advance(60)
    review = Review.objects.get(job=job)
    assert reviews.decide_review(review.pk, ReviewStatus.APPROVED, user, clock=clock)
    review.refresh_from_db()
    assert review.review_wait_seconds == 60.0
    assert (review.decided_at - job.created_at).total_seconds() == 63.0
    now = clock.now()
    table = measures.all_percentiles(now, dt.timedelta(hours=1), None)
    assert table[Measure.REVIEW_WAIT]["acme"].p50 == 60.0
    assert table[Measure.END_TO_END]["acme"].p99 == 63.0
    assert table[Measure.QUEUE_WAIT]["acme"].count == 1 and table[Measure.QUEUE_WAIT]["acme"].p95 == 2.0
    assert table[Measure.INFERENCE]["acme"].count == 1


def test_percentiles_equal_postgresql_percentile_cont_and_respect_window_and_tenants(clock):
    start = clock.now()
    rng = random.Random(7)
    for n in range(40):
        tenant = "acme" if n % 3 else "globex"
        queue.enqueue(tenant, f"d{n}", 1, invoice(n), clock=clock)
        clock.advance(rng.uniform(0, 5))
        lease = queue.lease_next("w1", clock=clock)
        queue.ack(lease, clock=clock)
    now = clock.now()
    window = now - start + dt.timedelta(seconds=1)
    got = measures.percentiles(Measure.QUEUE_WAIT, now, window, None)
    expected = sql.fetch(
        "SELECT tenant, count(*) AS n, percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM leased_at - due_at)) AS p50,"
        " percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM leased_at - due_at)) AS p95,"
        " percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM leased_at - due_at)) AS p99"
        " FROM pipeline_attempt GROUP BY tenant ORDER BY tenant", {})
    assert sorted(got) == ["acme", "globex"]
    for row in expected:
        value = got[row["tenant"]]
        assert value.count == row["n"]
        assert value.p50 == pytest.approx(float(row["p50"]))
        assert value.p95 == pytest.approx(float(row["p95"]))
        assert value.p99 == pytest.approx(float(row["p99"]))
    # the Python fallback (SQLite) computes the same numbers
    values = [a.queue_wait_seconds for a in Attempt.objects.filter(tenant="acme")]
    assert measures.summarise(values).p95 == pytest.approx(got["acme"].p95)
    # scoped: an operator of acme reads acme only; outside the window nothing
    assert list(measures.percentiles(Measure.QUEUE_WAIT, now, window, frozenset({"acme"}))) == ["acme"]
    assert measures.percentiles(Measure.QUEUE_WAIT, now, window, frozenset()) == {}
    later = now + dt.timedelta(hours=2)
    assert measures.percentiles(Measure.QUEUE_WAIT, later, dt.timedelta(hours=1), None) == {}


def test_an_unknown_window_is_the_default():
    assert measures.window_of("24h") == "24h"
    assert measures.window_of("1y") == measures.window_of(None) == "1h"


def test_an_attempt_from_before_due_at_was_kept_has_no_queue_wait_not_a_zero(clock):
    queue.enqueue("acme", "old", 1, invoice(1), clock=clock)
    clock.advance(5)
    process_once("w1", clock=clock)
    Attempt.objects.update(due_at=None)  # as the migration leaves the attempts written before it
    table = measures.all_percentiles(clock.now(), dt.timedelta(hours=1), None)
    assert table[Measure.QUEUE_WAIT] == {}
    assert table[Measure.INFERENCE]["acme"].count == 1
    assert Attempt.objects.get().queue_wait_seconds is None
