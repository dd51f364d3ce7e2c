"""Reprocess never answers 500 and never half-does a batch: each row's outcome is reported, each row in
its own transaction; the audit holds an entry only for a job the reprocess created, and only such a
reprocess spends the rate limit. Forged or stale selections do nothing and say why."""

from __future__ import annotations

import re
import threading

import pytest
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.urls import reverse
from django.utils.html import strip_tags

from dlq.errors import NextVersionExistsError
from dlq.models import AuditEntry, ReprocessRefusal
from dlq.services import RowResult, reprocess_from_dlq, reprocess_many
from pipeline import queue
from pipeline.errors import NotReprocessableError
from pipeline.idempotency import MAX_OPERATION_VERSION
from pipeline.models import DeadLetter, Job
from pipeline.worker import process_once
from tests.admin import factories
from tests.admin.conftest import login
from tests.admin.factories import UNREADABLE, snapshot
from tests.conftest import invoice
from tests.waiting import wait_for

LIST = "admin:pipeline_deadletter_changelist"
OTHER = {"text": "a different scan, still not an invoice"}


def confirm(client, *ids):
    data = {"action": "reprocess", "_selected_action": list(ids), "post": "yes", "reason": "vendor re-sent it"}
    return client.post(reverse(LIST), data, follow=True)


def texts(response) -> list[str]:
    return [strip_tags(str(m)) for m in get_messages(response.wsgi_request)]


def dead_at(tenant: str, document_id: str, version: int, payload: dict = UNREADABLE) -> DeadLetter:
    job, _ = queue.enqueue(tenant, document_id, version, payload)
    assert process_once("w-test").job_id == job.pk
    return DeadLetter.objects.select_related("job").get(job=job)


@pytest.fixture
def limit_one(settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 1, "REPROCESS_WINDOW_SECONDS": 3600}


@pytest.mark.django_db
def test_the_reported_conflict_is_a_message_not_a_500_and_changes_nothing(acme_operator, limit_one):
    """acme/A-CONFLICT v1 dead-lettered; a client sent v2 with another payload; reprocess v1."""
    dead = dead_at("acme", "A-CONFLICT", 1)
    other = factories.dead_letter("acme", "fine-1")
    queue.enqueue("acme", "A-CONFLICT", 2, invoice())
    before = snapshot()
    response = confirm(login(acme_operator), dead.pk)
    assert response.status_code == 200
    assert texts(response) == [
        "Not reprocessed: acme:A-CONFLICT:v2 already exists with a different document and is queued; reprocessing "
        "the older version would conflict with it. Nothing was changed."
    ]
    assert snapshot() == before and not ReprocessRefusal.objects.exists()
    assert reprocess_from_dlq(other.pk, "script").created


@pytest.mark.django_db
def test_an_existing_next_version_with_the_same_document_is_reported_where_it_stands(acme_operator, limit_one):
    """v2 exists with v1's payload (it was itself dead-lettered): reprocessing v1 creates nothing, audits
    nothing, spends nothing, and tells the operator v2 exists and is dead-lettered."""
    dead = dead_at("acme", "A-SAME", 1)
    dead_at("acme", "A-SAME", 2)
    before = snapshot()
    response = confirm(login(acme_operator), dead.pk)
    assert texts(response) == [
        "Not reprocessed: acme:A-SAME:v2 already exists with the same document and is dead-lettered; nothing new "
        "was created. To run it again, reprocess its own dead letter."
    ]
    assert snapshot() == before and AuditEntry.objects.count() == 0
    v2 = Job.objects.get(idempotency_key="acme:A-SAME:v2")
    assert reverse("admin:pipeline_job_change", args=[v2.pk]) in response.content.decode()
    assert reprocess_from_dlq(v2.dead_letter.pk, "script").new_job.idempotency_key == "acme:A-SAME:v3"


@pytest.mark.django_db
def test_a_batch_reports_every_row_and_commits_each_on_its_own(acme_operator, settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 2}
    first = dead_at("acme", "doc-a", 1)
    conflict = dead_at("acme", "doc-b", 1)
    last = dead_at("acme", "doc-d", MAX_OPERATION_VERSION)
    done_before = dead_at("acme", "doc-e", 1)
    second = dead_at("acme", "doc-f", 1)
    limited = dead_at("acme", "doc-g", 1)
    reprocess_from_dlq(done_before.pk, "script")  # spends one of the two
    queue.enqueue("acme", "doc-b", 2, OTHER)
    rows = [first, conflict, last, done_before, second, limited]
    response = confirm(login(acme_operator), *[d.pk for d in rows])
    assert response.status_code == 200
    shown = texts(response)
    assert re.fullmatch(r"Tenant acme reached its reprocess limit: try again in (1 h|59 min)\. 2 dead letters of "
                        r"acme were not reprocessed\.", shown.pop(3))
    assert shown == [
        "Reprocessed 1 dead letter as a new version: acme:doc-a:v2.",
        "1 dead letter had been reprocessed before, nothing new was created; its new version: acme:doc-e:v2 "
        "(queued).",
        "Not reprocessed: acme:doc-b:v2 already exists with a different document and is queued; reprocessing the "
        "older version would conflict with it. Nothing was changed.",
        f"Not reprocessed: acme:doc-d:v{MAX_OPERATION_VERSION} is the last version a document may have. "
        "Nothing was changed.",
    ]
    audited = sorted(AuditEntry.objects.values_list("new_job__idempotency_key", flat=True))
    assert audited == ["acme:doc-a:v2", "acme:doc-e:v2"]  # one per job really created
    assert not Job.objects.filter(document_id__in=["doc-f", "doc-g"], operation_version=2).exists()
    assert set(ReprocessRefusal.objects.values_list("dead_letter_id", flat=True)) == {second.pk, limited.pk}


@pytest.mark.django_db
def test_select_all_reprocesses_the_tenant_around_a_conflicting_row(acme_operator):
    rows = [dead_at("acme", f"doc-{n}", 1) for n in range(3)]
    queue.enqueue("acme", "doc-1", 2, OTHER)
    client = login(acme_operator)
    asked = client.post(reverse(LIST), {"action": "reprocess", "_selected_action": [rows[0].pk], "select_across": "1",
                                        "index": "0"})
    listed = [obj.pk for obj in asked.context["objects"]]  # "select all": every row of the list
    assert sorted(listed) == sorted(d.pk for d in rows)
    response = confirm(client, *listed)
    messages = texts(response)
    assert messages[0] == "Reprocessed 2 dead letters as new versions: acme:doc-0:v2, acme:doc-2:v2."
    assert messages[1].startswith("Not reprocessed: acme:doc-1:v2 already exists with a different document")
    assert AuditEntry.objects.count() == 2 and len(rows) == 3


@pytest.mark.django_db
def test_the_service_refuses_an_existing_next_version_and_writes_nothing():
    conflict, same = dead_at("acme", "doc-c", 1), dead_at("acme", "doc-s", 1)
    queue.enqueue("acme", "doc-c", 2, OTHER)
    queue.enqueue("acme", "doc-s", 2, UNREADABLE)
    before = snapshot()
    for dead, same_payload in ((conflict, False), (same, True)):
        with pytest.raises(NextVersionExistsError) as refused:
            reprocess_from_dlq(dead.pk, "script")
        assert refused.value.same_payload is same_payload and refused.value.job.operation_version == 2
        assert isinstance(refused.value, NotReprocessableError)  # callers that catch the family still do
    assert snapshot() == before
    outcomes = reprocess_many([conflict.pk, same.pk, 10**9], "script")
    assert [o.result for o in outcomes] == [RowResult.CONFLICT, RowResult.VERSION_EXISTS, RowResult.NOT_REPROCESSABLE]
    assert snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_a_next_version_enqueued_during_the_reprocess_is_reported_not_audited():
    """A client's enqueue of v2 commits while the reprocess waits on v2's key: the reprocess says v2
    exists (it did not create it), writes no audit entry, and the client's job stands."""
    dead = dead_at("acme", "doc-race", 1)
    inserted, release = threading.Event(), threading.Event()

    def client() -> None:
        try:
            with transaction.atomic():
                queue.enqueue("acme", "doc-race", 2, OTHER)
                inserted.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=client)
    thread.start()
    assert inserted.wait(30)
    outcome: list[object] = []

    def operator() -> None:
        try:
            outcome.extend(reprocess_many([dead.pk], "script"))
        finally:
            connection.close()

    reprocessing = threading.Thread(target=operator)
    reprocessing.start()
    wait_for(lambda: _waiting_on_a_lock() > 0, timeout=30, what="the reprocess to wait on v2's key")
    release.set()
    thread.join(30)
    reprocessing.join(30)
    (row,) = outcome
    assert row.result == RowResult.CONFLICT and row.job.idempotency_key == "acme:doc-race:v2"
    assert AuditEntry.objects.count() == 0
    assert Job.objects.get(idempotency_key="acme:doc-race:v2").reprocessed_from_id is None


def _waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'")
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_a_forged_selection_of_another_tenants_rows_does_nothing_and_says_why(acme_operator):
    mine, theirs = dead_at("acme", "doc-1", 1), dead_at("globex", "doc-2", 1)
    before = snapshot()
    client = login(acme_operator)
    for ids in ([theirs.pk], [mine.pk, theirs.pk], [10**9]):
        first = client.post(reverse(LIST), {"action": "reprocess", "_selected_action": ids, "index": "0"}, follow=True)
        confirmed = confirm(client, *ids)
        for response in (first, confirmed):
            assert texts(response) == ["Nothing was done: 1 selected row is not in your tenants or no longer exists. "
                                       "Reload the list and select again."]
    assert snapshot() == before
