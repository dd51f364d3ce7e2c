"""One definition per question: the raw claim and ``Job.objects.claimable`` select the same jobs, the
relay's claim and ``OutboxEvent.objects.pending`` the same events, and the transition table is the rule
every status write obeys."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection

from pipeline import queue, sql, states
from pipeline.errors import StaleLeaseError
from pipeline.models import Job, OutboxEvent
from pipeline.outbox import commit_result_with_event
from pipeline.states import JobStatus
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


def every_kind_of_job(clock) -> dict[str, int]:
    """One job of each kind a claimer meets, by name."""
    now = clock.now()
    ids = {}
    names = ("queued", "future", "spent", "leased_live", "leased_expired", "last_attempt_expired", "crashed_out",
             "past_deadline", "done")
    for name in names:
        ids[name] = queue.enqueue("acme", name, 1, invoice(), max_attempts=3, max_lease_expiries=2,
                                  deadline=dt.timedelta(hours=1), clock=clock)[0].pk
    Job.objects.filter(pk=ids["future"]).update(visible_at=now + dt.timedelta(minutes=5))
    Job.objects.filter(pk=ids["spent"]).update(attempt=3)  # queued with no attempt left
    leases = {  # name: (lease ends, attempt, lease expiries so far)
        "leased_live": (dt.timedelta(seconds=30), 1, 0), "leased_expired": (-dt.timedelta(seconds=1), 1, 0),
        "last_attempt_expired": (-dt.timedelta(seconds=1), 3, 1),  # crashes are not attempts: retaken
        "crashed_out": (-dt.timedelta(seconds=1), 1, 2),  # no lease expiry left: the rescuer's
    }
    for name, (ends, attempt, expiries) in leases.items():
        Job.objects.filter(pk=ids[name]).update(
            status=JobStatus.LEASED, lease_owner="w", lease_until=now + ends, visible_at=now - dt.timedelta(minutes=1),
            fence=1 + expiries, attempt=attempt, lease_expiries=expiries)
    Job.objects.filter(pk=ids["past_deadline"]).update(deadline_at=now - dt.timedelta(seconds=1),
                                                       visible_at=now - dt.timedelta(minutes=2))
    Job.objects.filter(pk=ids["done"]).update(status=JobStatus.SUCCEEDED, finished_at=now)
    return ids


def raw_claimable(now: dt.datetime) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(sql.CLAIMABLE, {"now": now})
        return {row[0] for row in cursor.fetchall()}


def test_the_claim_and_the_queryset_select_the_same_jobs(clock):
    ids = every_kind_of_job(clock)
    expected = {ids[name] for name in ("queued", "leased_expired", "last_attempt_expired", "past_deadline")}
    assert set(Job.objects.claimable(clock.now()).values_list("pk", flat=True)) == expected
    assert raw_claimable(clock.now()) == expected


def test_the_claim_takes_exactly_the_claimable_jobs(clock):
    ids = every_kind_of_job(clock)
    claimable = set(Job.objects.claimable(clock.now()).values_list("pk", flat=True))
    taken = set()
    while (lease := queue.lease_next("w2", clock=clock)) is not None:
        taken.add(lease.job_id)
    cancelled = set(Job.objects.filter(status=JobStatus.CANCELLED, last_error_code="deadline_exceeded")
                    .values_list("pk", flat=True))
    assert taken | cancelled == claimable and cancelled == {ids["past_deadline"]}


def test_the_relay_claims_exactly_the_pending_events(clock):
    for n in range(7):
        queue.enqueue("acme", f"doc-{n}", 1, invoice(n), clock=clock)
        commit_result_with_event(queue.lease_next("w", clock=clock), {"n": n}, clock=clock)
    events = list(OutboxEvent.objects.order_by("pk"))
    OutboxEvent.objects.filter(pk=events[0].pk).update(claimed_until=clock.now() + dt.timedelta(seconds=30))
    OutboxEvent.objects.filter(pk=events[1].pk).update(claimed_until=clock.now() - dt.timedelta(seconds=1))
    OutboxEvent.objects.filter(pk=events[2].pk).update(publish_attempts=20)  # parked: interrupted too often
    OutboxEvent.objects.filter(pk=events[4].pk).update(next_attempt_at=clock.now() + dt.timedelta(seconds=1))
    OutboxEvent.objects.filter(pk=events[5].pk).update(next_attempt_at=clock.now(), failures=1)  # its backoff ended
    OutboxEvent.objects.filter(pk=events[6].pk).update(parked_at=clock.now(), failures=10)  # parked: failed too often
    pending = set(OutboxEvent.objects.pending(clock.now()).values_list("pk", flat=True))
    assert pending == {events[1].pk, events[3].pk, events[5].pk}
    assert set(OutboxEvent.objects.parked().values_list("pk", flat=True)) == {events[2].pk, events[6].pk}
    claimed = sql.fetch(sql.CLAIM_EVENTS.format(skip_locked=sql.skip_locked(), facts=""), {
        "token": sql.uuid_param(events[0].event_id), "now": clock.now(), "limit": 100, "max_attempts": 20,
        "claimed_until": clock.now() + dt.timedelta(seconds=30),
    })
    assert {row["id"] for row in claimed} == pending


def test_the_transition_table_is_the_rule_of_every_status_write(clock, monkeypatch):
    queue.enqueue("acme", "doc", 1, invoice(), clock=clock)
    lease = queue.lease_next("w", clock=clock)
    table = {**states.TRANSITIONS, JobStatus.LEASED: states.TRANSITIONS[JobStatus.LEASED] - {JobStatus.SUCCEEDED}}
    monkeypatch.setattr(states, "TRANSITIONS", table)
    with pytest.raises(StaleLeaseError):
        commit_result_with_event(lease, {"ok": True}, clock=clock)
    monkeypatch.undo()
    assert commit_result_with_event(lease, {"ok": True}, clock=clock).deduped is False


def test_the_claim_and_the_queryset_both_skip_a_paused_tenant(clock):
    from tenancy.models import TenantControl

    ids = every_kind_of_job(clock)
    paused, _ = queue.enqueue("initech", "waiting", 1, invoice(), clock=clock)
    TenantControl.objects.create(tenant="initech", intake_paused=True, paused_at=clock.now(), updated_at=clock.now())
    TenantControl.objects.create(tenant="acme", intake_paused=False, updated_at=clock.now())  # open: no effect
    expected = {ids[name] for name in ("queued", "leased_expired", "last_attempt_expired", "past_deadline")}
    assert paused.pk not in expected
    assert set(Job.objects.claimable(clock.now()).values_list("pk", flat=True)) == expected
    assert raw_claimable(clock.now()) == expected


def test_the_claim_function_selects_as_the_claimable_definition_says():
    """relayops_claim (a migration's text) reads the claimable jobs with sql.CLAIMABLE's very words: its
    claim as sql.CLAIM_NEXT, and its look for another waiting job with the same predicate."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'relayops_claim'")
        (source,) = cursor.fetchone()
    words = " ".join(source.split())
    claim = " ".join(sql.CLAIM_NEXT.replace("%(now)s", "p_now").split())
    predicate = claim.split(" WHERE ", 1)[1].split(" ORDER BY ")[0]
    assert claim.replace("SELECT * FROM", "SELECT * INTO prior FROM", 1) in words
    assert words.count(predicate) == 2
