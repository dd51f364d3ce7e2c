"""Retries, the DLQ with classified reasons only, deadline cancellation and the audited reprocess."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction

from dlq.models import AuditEntry
from pipeline.models import DeadLetter
from dlq.services import reprocess_from_dlq
from pipeline import queue
from pipeline.errors import JobCancelledError, NotReprocessableError, PermanentError, TransientError
from pipeline.models import Attempt, Job
from pipeline.reasons import DeadLetterReason, ErrorCode
from pipeline.worker import process_once
from tests.conftest import invoice
from tests.integration.conftest import MODELS, row_counts

pytestmark = pytest.mark.django_db

PII = "CPF 123.456.789-09 Maria Souza"


def run_until_terminal(clock, extractor=None, limit: int = 10) -> list[str]:
    """Run the worker, moving past each backoff, until nothing is claimable; return the outcomes."""
    kwargs = {"extractor": extractor} if extractor else {}
    outcomes = []
    for _ in range(limit):
        out = process_once("w1", lease_seconds=30, clock=clock, **kwargs)
        if out.outcome == "idle":
            return outcomes
        outcomes.append(out.outcome)
        clock.advance(400)  # past the longest backoff (300 s + 20 % jitter)
    raise AssertionError(f"still claimable after {limit} runs: {outcomes}")


def leaking_extractor(error_type):
    def extractor(document, checkpoint):
        excerpt = document.payload["text"][:30]
        raise error_type(f"parser choked on {excerpt!r} near {PII!r}")

    return extractor


def columns_containing(needle: str, *, skip: tuple[str, ...] = ()) -> list[str]:
    found = []
    for model in MODELS:
        for row in model.objects.values():
            for column, value in row.items():
                if f"{model.__name__}.{column}" not in skip and needle in str(value):
                    found.append(f"{model.__name__}.{column}")
    return found


@pytest.mark.parametrize(
    ("error_type", "reason", "code", "attempts"),
    [
        (ValueError, DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, ErrorCode.UNCLASSIFIED, 3),
        (lambda message: PermanentError(ErrorCode.DOCUMENT_MALFORMED, message),
         DeadLetterReason.PERMANENT_ERROR, ErrorCode.DOCUMENT_MALFORMED, 1),
    ],
    ids=["unknown-exception", "permanent-error"],
)
def test_dead_letter_reason_is_a_code_never_the_error_text(clock, caplog, error_type, reason, code, attempts):
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    caplog.set_level("DEBUG")
    outcomes = run_until_terminal(clock, leaking_extractor(error_type))
    assert outcomes == ["retry"] * (attempts - 1) + ["dead_lettered"]
    dead = DeadLetter.objects.get(job=job)
    assert (dead.reason_code, dead.error_code, dead.attempts) == (reason, code, attempts)
    assert list(Attempt.objects.filter(job=job).values_list("error_code", flat=True).distinct()) == [code]
    assert Job.objects.get(pk=job.pk).last_error_code == code
    # Neither the PII in the message nor the document text it quoted is stored outside the payload.
    assert columns_containing("123.456.789-09") == []
    assert columns_containing("Maria Souza") == []
    assert columns_containing("INVOICE NO: INV-1", skip=("Job.payload",)) == []
    assert "123.456.789-09" not in caplog.text and "INVOICE NO" not in caplog.text
    assert any("job.failed" in record.getMessage() for record in caplog.records)  # the logs were captured


def test_retry_ceiling_three_attempts_then_dlq_never_a_fourth(clock, counting_extractor):
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(transient_failures=99), clock=clock)
    assert run_until_terminal(clock, counting_extractor) == ["retry", "retry", "dead_lettered"]
    clock.advance(3600 * 24)
    assert process_once("w9", clock=clock).outcome == "idle"
    assert counting_extractor.calls == 3
    job.refresh_from_db()
    assert (job.status, job.attempt, job.fence) == ("dead_lettered", 3, 3)
    assert list(Attempt.objects.filter(job=job).order_by("fence").values_list("attempt", "error_code")) == [
        (1, "extractor_unavailable"), (2, "extractor_unavailable"), (3, "extractor_unavailable"),
    ]
    dead = DeadLetter.objects.get()
    assert (dead.reason_code, dead.error_code, dead.attempts) == ("max_attempts_exceeded", "extractor_unavailable", 3)


def test_a_retry_waits_for_its_backoff(clock):
    queue.enqueue("acme", "inv-1", 1, invoice(transient_failures=1), clock=clock)
    assert process_once("w1", clock=clock).outcome == "retry"
    job = Job.objects.get()
    assert job.status == "queued" and clock.now() < job.visible_at <= clock.now() + dt.timedelta(seconds=1.2)
    assert process_once("w1", clock=clock).outcome == "idle"
    clock.advance(1.2)
    assert process_once("w1", clock=clock).outcome == "committed"


def test_deadline_cancel_has_no_dead_letter_and_no_reprocess_path(clock):
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), deadline=dt.timedelta(minutes=5), clock=clock)
    clock.advance(300)
    assert queue.lease_next("w1", clock=clock) is None
    job.refresh_from_db()
    assert (job.status, job.last_error_code) == ("cancelled", "deadline_exceeded")
    assert not DeadLetter.objects.exists()
    before = row_counts()
    for candidate in (job.pk, 1, 10**6):
        with pytest.raises(NotReprocessableError):
            reprocess_from_dlq(candidate, "ops-maria", clock=clock)
    assert row_counts() == before
    assert process_once("w1", clock=clock).outcome == "idle"


def test_a_retry_that_could_only_start_after_the_deadline_cancels_now(clock):
    # The first backoff is 1 s +/- 20 % jitter: it can never start before a deadline 0.5 s away.
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), deadline=dt.timedelta(seconds=0.5), clock=clock)

    def slow_model(document, checkpoint):
        raise TransientError(ErrorCode.EXTRACTOR_TIMEOUT)

    assert process_once("w1", extractor=slow_model, clock=clock).outcome == "cancelled"
    job.refresh_from_db()
    assert (job.status, job.attempt, job.last_error_code) == ("cancelled", 1, "deadline_unreachable")
    assert not DeadLetter.objects.exists()


def test_work_that_cancels_itself_is_cancelled_not_dead_lettered(clock):
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)

    def withdrawn(document, checkpoint):
        raise JobCancelledError()

    assert process_once("w1", extractor=withdrawn, clock=clock).outcome == "cancelled"
    assert Job.objects.get(pk=job.pk).status == "cancelled" and not DeadLetter.objects.exists()


@pytest.fixture
def dead_letter(clock):
    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), max_attempts=2, deadline=dt.timedelta(hours=2),
                           clock=clock)

    def broken(document, checkpoint):
        raise PermanentError(ErrorCode.SCHEMA_INVALID)

    assert run_until_terminal(clock, broken) == ["dead_lettered"]
    return DeadLetter.objects.get(job=job)


def test_reprocess_creates_version_plus_one_with_the_operator_audited(clock, dead_letter):
    old = dead_letter.job
    clock.advance(60)
    outcome = reprocess_from_dlq(dead_letter.pk, " ops-maria ", reason="extractor template fixed", clock=clock)
    assert outcome.created
    new = outcome.new_job
    assert (new.tenant, new.document_id, new.operation_version, new.idempotency_key) == (
        "acme", "inv-1", 2, "acme:inv-1:v2",
    )
    assert (new.payload, new.payload_hash, new.max_attempts) == (old.payload, old.payload_hash, 2)
    assert (new.status, new.attempt, new.fence, new.reprocessed_from_id) == ("queued", 0, 0, old.pk)
    assert new.deadline_at - new.created_at == dt.timedelta(hours=2)
    entry = AuditEntry.objects.get()
    assert (entry.operator, entry.operator_user, entry.action, entry.tenant, entry.reason, entry.at) == (
        "ops-maria", None, "reprocess", "acme", "extractor template fixed", clock.now(),
    )
    assert (entry.dead_letter_id, entry.old_job_id, entry.new_job_id) == (dead_letter.pk, old.pk, new.pk)
    old.refresh_from_db()
    assert old.status == "dead_lettered"  # never revived
    assert process_once("w1", clock=clock).outcome == "committed"
    assert Job.objects.get(pk=new.pk).status == "succeeded"


def test_second_reprocess_returns_the_first_new_job(clock, dead_letter):
    first = reprocess_from_dlq(dead_letter.pk, "ops-maria", clock=clock)
    before = row_counts()
    clock.advance(10)
    second = reprocess_from_dlq(dead_letter.pk, "ops-joao", clock=clock)
    assert (second.created, second.new_job.pk, second.audit_entry.pk) == (False, first.new_job.pk, first.audit_entry.pk)
    assert row_counts() == before
    assert AuditEntry.objects.get().operator == "ops-maria"


def test_reprocess_by_a_user_records_the_user(clock, dead_letter):
    user = get_user_model().objects.create_user("maria", password="x" * 12)
    outcome = reprocess_from_dlq(dead_letter.pk, user, clock=clock)
    assert (outcome.audit_entry.operator, outcome.audit_entry.operator_user_id) == ("maria", user.pk)


@pytest.mark.parametrize("operator", [None, "", "   ", "x" * 151, "ops\x00", object()])
def test_reprocess_requires_an_operator_identity(clock, dead_letter, operator):
    before = row_counts()
    with pytest.raises(ValueError) as info:
        reprocess_from_dlq(dead_letter.pk, operator, clock=clock)
    assert info.value.field == "operator"
    assert row_counts() == before


def test_the_audit_is_append_only_in_the_database(clock, dead_letter):
    reprocess_from_dlq(dead_letter.pk, "ops-maria", clock=clock)
    for change in (lambda q: q.update(operator="someone-else"), lambda q: q.delete()):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            change(AuditEntry.objects.all())
    with connection.cursor() as cursor:  # tests/conftest.py turns it off for the flush; on again here
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred FK check may be pending on ALTER
        cursor.execute("ALTER TABLE dlq_auditentry ENABLE TRIGGER dlq_auditentry_no_truncate")
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            cursor.execute("TRUNCATE dlq_auditentry")
    assert AuditEntry.objects.get().operator == "ops-maria"
