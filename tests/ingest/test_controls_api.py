"""``POST /api/v1/jobs/{id}/cancel`` and ``/run-now``: the API key's tenant only, audited as the key."""

from __future__ import annotations

import pytest

from dlq.models import AuditEntry
from pipeline import queue
from pipeline.errors import TransientError
from pipeline.models import Job
from pipeline.reasons import ErrorCode
from tests.admin.factories import snapshot
from tests.conftest import invoice
from tests.ingest.conftest import assert_problem

pytestmark = pytest.mark.django_db


def test_cancel_a_queued_job_answers_its_status_and_audits_the_key(acme):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1))
    response = acme.post(f"/jobs/{job.pk}/cancel", {"reason": "sent by mistake"})
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["error_code"]) == ("cancelled", "cancelled")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.operator, entry.reason, entry.job_id) == (
        "cancel", "api-key:billing-bot", "sent by mistake", job.pk)


def test_cancel_a_finished_job_is_a_409_and_changes_nothing(acme):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1))
    acme.post(f"/jobs/{job.pk}/cancel", {"reason": "first"})
    before = snapshot()
    body = assert_problem(acme.post(f"/jobs/{job.pk}/cancel", {"reason": "again"}), 409)
    assert "only a queued or leased job" in body["detail"]
    assert snapshot() == before


def test_another_tenants_job_is_a_404_like_a_missing_one_and_changes_nothing(acme):
    theirs, _ = queue.enqueue("globex", "doc", 1, invoice(1))
    before = snapshot()
    for path in (f"/jobs/{theirs.pk}/cancel", f"/jobs/{theirs.pk}/run-now"):
        foreign = assert_problem(acme.post(path, {"reason": "x"}), 404)
        missing = assert_problem(acme.post(path.replace(str(theirs.pk), str(theirs.pk + 999)), {"reason": "x"}), 404)
        assert foreign["detail"].replace(str(theirs.pk), "N") == missing["detail"].replace(str(theirs.pk + 999), "N")
    assert snapshot() == before


def test_run_now_of_a_retry_waiting_job(acme):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1))
    lease = queue.lease_next("w")
    queue.nack(lease, TransientError(ErrorCode.EXTRACTOR_UNAVAILABLE))
    waiting = Job.objects.get(pk=job.pk).visible_at
    assert acme.post(f"/jobs/{job.pk}/run-now", {"reason": "extractor back"}).status_code == 200
    assert Job.objects.get(pk=job.pk).visible_at < waiting
    assert queue.lease_next("w").job_id == job.pk
    assert_problem(acme.post(f"/jobs/{job.pk}/run-now", {"reason": "again"}), 409)


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": 5}, {"reason": "x" * 501}, {"reason": "x", "more": 1}])
def test_a_missing_or_bad_reason_is_a_422_and_changes_nothing(acme, body):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1))
    before = snapshot()
    assert_problem(acme.post(f"/jobs/{job.pk}/cancel", body), 422)
    assert snapshot() == before


def test_without_a_key_it_is_a_401(db):
    from tests.ingest.conftest import ApiClient

    job, _ = queue.enqueue("acme", "doc", 1, invoice(1))
    assert_problem(ApiClient(None).post(f"/jobs/{job.pk}/cancel", {"reason": "x"}), 401)
    assert Job.objects.get().status == "queued"


@pytest.mark.parametrize("job_id", ["0", "-1", "99999999999999999999", "abc"])
def test_a_bad_job_id_is_a_clear_problem(acme, job_id):
    response = acme.post(f"/jobs/{job_id}/cancel", {"reason": "x"})
    assert response.status_code in (404, 422) and response["Content-Type"] == "application/problem+json"
