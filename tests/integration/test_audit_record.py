"""The audit's one writer: any operator decision, inside the transaction of the change it records."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, connection, transaction

from dlq import audit
from dlq.models import AuditAction, AuditEntry
from pipeline import queue
from pipeline.errors import InvalidInputError
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


def test_a_decision_is_recorded_with_its_job_and_event(clock):
    job, _ = queue.enqueue("acme", "INV-1", 1, invoice(), clock=clock)
    event = uuid.uuid4()
    with transaction.atomic():
        audit.record(AuditAction.CANCEL, at=clock.now(), tenant="acme", operator="ops-script",
                     reason="stuck since Monday", job=job, event_id=event, detail="was queued")
    row = AuditEntry.objects.get()
    assert (row.action, row.operator, row.job_id, row.event_id, row.detail, row.reason) == (
        "cancel", "ops-script", job.pk, event, "was queued", "stuck since Monday")


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_nothing_is_written(clock):
    with pytest.raises(RuntimeError, match="inside the transaction"):
        audit.record(AuditAction.RUN_NOW, at=clock.now(), tenant="acme", operator="ops")
    assert AuditEntry.objects.count() == 0


@pytest.mark.parametrize("operator", ["", "   ", None, "x" * 151, "tab\there"])
def test_an_operator_identity_is_required(clock, operator):
    with pytest.raises(InvalidInputError), transaction.atomic():
        audit.record(AuditAction.PAUSE_INTAKE, at=clock.now(), tenant="acme", operator=operator)
    assert AuditEntry.objects.count() == 0


def test_a_reprocess_entry_must_name_its_dead_letter_and_both_jobs(clock):
    with pytest.raises(IntegrityError), transaction.atomic():
        audit.record(AuditAction.REPROCESS, at=clock.now(), tenant="acme", operator="ops")
    assert AuditEntry.objects.count() == 0


def test_new_entries_stay_append_only(clock):
    with transaction.atomic():
        entry = audit.record(AuditAction.PAUSE_INTAKE, at=clock.now(), tenant="acme", operator="ops")
    with pytest.raises(Exception, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE dlq_auditentry SET detail = 'x' WHERE id = %s", [entry.pk])
    assert AuditEntry.objects.get().detail == ""
