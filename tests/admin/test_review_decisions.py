"""Deciding a review (review.decisions): approve, reject, correct; once; on the record; the event leaves."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, connection, transaction
from django.db.utils import InternalError, ProgrammingError

from dlq.models import AuditEntry
from pipeline.clock import FrozenClock
from pipeline.models import OutboxEvent, Result, Review
from pipeline.outbox import REVIEW_DECIDED_TOPIC
from pipeline.relay import publish_pending
from review.decisions import decide
from review.errors import AlreadyDecidedError, InvalidInputError, NoSuchReviewError, NotAllowedError
from review.fields import CorrectionRefused
from review.models import ReviewDecision
from tests.admin import factories, reviewing
from tests.admin.factories import snapshot

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.timezone.utc)


@pytest.fixture
def review() -> Review:
    return reviewing.review_of("acme", "invoice-1")


def everything() -> dict:
    rows = snapshot()
    assert "ReviewDecision" in rows
    return rows


def decided_events() -> list[OutboxEvent]:
    return list(OutboxEvent.objects.filter(topic=REVIEW_DECIDED_TOPIC))


def test_approve_writes_the_decision_the_audit_and_the_event_together(review, acme_operator):
    row = decide(review.pk, "approve", acme_operator, clock=FrozenClock(NOW))
    review.refresh_from_db()
    assert (review.status, review.decided_by_id, review.decided_at) == ("approved", acme_operator.pk, NOW)
    assert (row.decision, row.corrected, row.diff, row.decided_by_id) == ("approve", None, [], acme_operator.pk)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.operator, entry.review_id, entry.job_id, entry.tenant, entry.at) == (
        "approve", "olivia", review.pk, review.job_id, "acme", NOW)
    [event] = decided_events()
    stored = Result.objects.get(job=review.job).data
    assert (event.tenant, event.idempotency_key) == ("acme", review.idempotency_key)
    assert event.payload["decision"] == "approve" and event.payload["fields"] == stored
    assert event.payload["review_id"] == review.pk and event.payload["corrected_fields"] == []


def test_reject_needs_a_reason_and_emits_no_event(review, acme_operator):
    before = everything()
    with pytest.raises(InvalidInputError) as refused:
        decide(review.pk, "reject", acme_operator, reason="   ")
    assert refused.value.field == "reason"
    assert everything() == before
    decide(review.pk, "reject", acme_operator, reason="duplicate of INV-6")
    review.refresh_from_db()
    assert review.status == "rejected"
    assert ReviewDecision.objects.get().reason == "duplicate of INV-6"
    assert AuditEntry.objects.get().reason == "duplicate of INV-6"
    assert decided_events() == []


def test_a_correction_keeps_the_result_and_stores_final_values_and_diff(review, acme_operator):
    stored = Result.objects.get(job=review.job).data
    row = decide(review.pk, "correct", acme_operator, values={"vendor": "Globex Supplies Limited",
                                                              "line_items.0.unit_price": "10.0"})
    assert Result.objects.get(job=review.job).data == stored  # the extractor's output is untouched
    assert row.corrected == {**stored, "vendor": "Globex Supplies Limited"}  # 10.0 is 10: no change
    assert row.diff == [{"field": "vendor", "extracted": "Globex Supplies Ltd", "corrected": "Globex Supplies Limited"}]
    review.refresh_from_db()
    assert review.status == "approved"
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.detail) == ("correct", "corrected: vendor")
    assert "Limited" not in entry.detail + entry.reason  # names, never values
    [event] = decided_events()
    assert event.payload["fields"]["vendor"] == "Globex Supplies Limited"
    assert event.payload["decision"] == "correct" and event.payload["corrected_fields"] == ["vendor"]


@pytest.mark.parametrize("values, problem", [
    ({"line_items.0.amount": "ten"}, {"line_items.0.amount": "must be a number (at most 6 decimal places)"}),
    ({"vendor": ""}, {"vendor": "is required"}),
    ({"nonsense": "x"}, {"nonsense": "is not a field of this result"}),
])
def test_a_correction_that_is_not_an_invoice_is_refused_naming_the_field(review, acme_operator, values, problem):
    before = everything()
    with pytest.raises(CorrectionRefused) as refused:
        decide(review.pk, "correct", acme_operator, values=values)
    assert refused.value.problems == problem
    assert everything() == before


def test_a_correction_that_breaks_a_rule_is_refused_naming_the_rule(review, acme_operator):
    before = everything()
    with pytest.raises(CorrectionRefused) as refused:
        decide(review.pk, "correct", acme_operator, values={"total": "99.00"})
    assert refused.value.rules == ["total"]
    with pytest.raises(CorrectionRefused) as refused:
        decide(review.pk, "correct", acme_operator, values={"currency": "XYZ", "due_date": "2026-01-01"})
    assert refused.value.rules == ["due_after_issue", "currency_known"]
    assert everything() == before


def test_a_correction_that_changes_nothing_is_refused(review, acme_operator):
    with pytest.raises(InvalidInputError, match="no field was changed"):
        decide(review.pk, "correct", acme_operator, values={"vendor": "Globex Supplies Ltd"})
    assert ReviewDecision.objects.count() == 0


def test_a_decision_is_final(review, acme_operator):
    factories.member("otto", "acme")
    decide(review.pk, "approve", acme_operator)
    before = everything()
    for decision, reason in (("approve", ""), ("reject", "no"), ("correct", "")):
        with pytest.raises(AlreadyDecidedError):
            decide(review.pk, decision, acme_operator, reason=reason,
                   values={"vendor": "X Ltd"} if decision == "correct" else None)
    assert everything() == before


def test_another_tenants_review_is_refused_like_a_missing_one(review, globex_operator):
    before = everything()
    with pytest.raises(NoSuchReviewError):
        decide(review.pk, "approve", globex_operator)
    with pytest.raises(NoSuchReviewError):
        decide(review.pk + 1000, "approve", globex_operator)
    assert everything() == before


def test_an_auditor_may_not_decide(review, auditor):
    before = everything()
    with pytest.raises(NotAllowedError):
        decide(review.pk, "approve", auditor)
    assert everything() == before


@pytest.mark.parametrize("kwargs, field", [
    ({"decision": "maybe"}, "decision"),
    ({"decision": "approve", "user": "anonymous"}, "decided_by"),
    ({"decision": "approve", "values": {"vendor": "X"}}, "values"),
    ({"decision": "reject", "reason": "x" * 501}, "reason"),
    ({"decision": "reject", "reason": 5}, "reason"),
    ({"decision": "approve", "review_id": "1"}, "review_id"),
])
def test_bad_input_is_refused_before_anything_is_written(review, acme_operator, kwargs, field):
    before = everything()
    user = AnonymousUser() if kwargs.pop("user", None) else acme_operator
    review_id = kwargs.pop("review_id", review.pk)
    with pytest.raises(InvalidInputError) as refused:
        decide(review_id, kwargs.pop("decision"), user, **kwargs)
    assert refused.value.field == field
    assert everything() == before


def test_the_event_is_published_and_the_review_consumer_leaves_it_alone(review, acme_operator):
    decide(review.pk, "approve", acme_operator)
    report = publish_pending()
    assert (report.published, report.failed) == (1, 0)
    assert Review.objects.count() == 1  # no second handoff from a review.decided event
    assert OutboxEvent.objects.get(topic=REVIEW_DECIDED_TOPIC).published_at is not None


def test_published_decisions_keep_every_pipeline_invariant(review, acme_operator):
    from pipeline.invariants import check_all

    other = reviewing.review_of("acme", "invoice-2")
    decide(review.pk, "correct", acme_operator, values={"vendor": "Globex Supplies Limited"})
    decide(other.pk, "reject", acme_operator, reason="not ours")
    assert publish_pending().published == 1
    broken = [finding.check for finding in check_all().findings if finding.broken]
    assert broken == []


def test_the_decision_table_refuses_update_and_delete(review, acme_operator):
    decide(review.pk, "approve", acme_operator)
    for statement in ("UPDATE review_reviewdecision SET decision = 'reject'", "DELETE FROM review_reviewdecision"):
        with pytest.raises((InternalError, ProgrammingError)), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    assert ReviewDecision.objects.get().decision == "approve"


def test_one_decision_per_review_in_the_database(review, acme_operator):
    row = decide(review.pk, "approve", acme_operator)
    with pytest.raises(IntegrityError), transaction.atomic():
        ReviewDecision.objects.create(review=review, tenant="acme", decision="approve", decided_by=acme_operator,
                                      decided_at=row.decided_at)


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_at_once_one_decision_lands():
    from tenancy.roles import ensure_roles

    ensure_roles()
    review = reviewing.review_of("acme", "invoice-race")
    users = [factories.member(name, "acme") for name in ("olivia", "oscar")]
    barrier, outcomes = threading.Barrier(2), []

    def attempt(user, decision):
        try:
            barrier.wait(timeout=30)
            decide(review.pk, decision, user, reason="not ours" if decision == "reject" else "")
            outcomes.append("decided")
        except AlreadyDecidedError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(user, d)) for user, d in zip(users, ("approve", "reject"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["decided", "refused"]
    assert ReviewDecision.objects.count() == 1 and AuditEntry.objects.count() == 1
    decision = ReviewDecision.objects.get().decision
    assert Review.objects.get().status == ("approved" if decision == "approve" else "rejected")
    assert len(decided_events()) == (1 if decision == "approve" else 0)
