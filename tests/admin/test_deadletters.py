"""The dead-letter list and "Reprocess as new version": confirmation, reason, audit, repeat, rate limit."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils.html import strip_tags

from dlq.admin import DeadLetterAdmin
from dlq.models import AuditEntry, ReprocessRefusal
from pipeline.models import Job
from tests.admin import factories
from tests.admin.conftest import login
from tests.admin.factories import snapshot

pytestmark = pytest.mark.django_db
LIST = "admin:pipeline_deadletter_changelist"


def ask(client, *ids):
    """The first POST: the action chosen in the list, which answers with the confirmation page."""
    return client.post(reverse(LIST), {"action": "reprocess", "_selected_action": list(ids), "index": "0"})


def confirm(client, *ids, reason="vendor re-sent a readable scan"):
    data = {"action": "reprocess", "_selected_action": list(ids), "post": "yes", "reason": reason}
    return client.post(reverse(LIST), data, follow=True)


def texts(response) -> list[str]:
    return [strip_tags(str(m)) for m in get_messages(response.wsgi_request)]


def test_the_list_shows_reason_codes_job_tenant_and_age(acme_operator):
    dead = factories.dead_letter("acme", "broken-1", clock=factories.ago(hours=3))
    response = login(acme_operator).get(reverse(LIST))
    row = response.context["cl"].result_list[0]
    assert row.pk == dead.pk
    html = response.content.decode()
    for shown in ("acme:broken-1:v1", "permanent_error", "document_malformed", "3 h", "timeline"):
        assert shown in html
    assert "not an invoice at all" not in html  # the payload is document content


def test_the_first_post_asks_for_a_reason_and_changes_nothing(acme_operator):
    dead = factories.dead_letter("acme", "broken-1")
    before = snapshot()
    response = ask(login(acme_operator), dead.pk)
    assert response.status_code == 200
    assert "admin/pipeline/deadletter/reprocess_confirmation.html" in [t.name for t in response.templates]
    html = response.content.decode()
    assert 'name="reason"' in html and "acme:broken-1:v1" in html and 'name="csrfmiddlewaretoken"' in html
    assert snapshot() == before


def test_confirming_without_a_reason_shows_the_page_again(acme_operator):
    dead = factories.dead_letter("acme", "broken-1")
    before = snapshot()
    response = confirm(login(acme_operator), dead.pk, reason="   ")
    assert response.status_code == 200 and response.context["form"].errors["reason"]
    assert snapshot() == before


def test_reprocess_creates_the_next_version_and_its_audit_entry(acme_operator):
    dead = factories.dead_letter("acme", "broken-1")
    response = confirm(login(acme_operator), dead.pk)
    new = Job.objects.get(tenant="acme", document_id="broken-1", operation_version=2)
    assert new.status == "queued" and new.reprocessed_from_id == dead.job_id
    entry = AuditEntry.objects.get()
    assert (entry.operator, entry.operator_user_id, entry.reason) == ("olivia", acme_operator.pk,
                                                                       "vendor re-sent a readable scan")
    assert (entry.old_job_id, entry.new_job_id, entry.dead_letter_id) == (dead.job_id, new.pk, dead.pk)
    assert texts(response) == ["Reprocessed 1 dead letter as a new version: acme:broken-1:v2."]
    assert reverse("admin:pipeline_job_change", args=[new.pk]) in response.content.decode()
    dead.job.refresh_from_db()
    assert dead.job.status == "dead_lettered"  # never revived


def test_a_second_reprocess_shows_the_existing_new_job(acme_operator):
    dead = factories.dead_letter("acme", "broken-1")
    confirm(login(acme_operator), dead.pk)
    before = snapshot()
    response = confirm(login(acme_operator), dead.pk, reason="again")
    assert texts(response) == [
        "1 dead letter had been reprocessed before, nothing new was created; its new version: acme:broken-1:v2 "
        "(queued)."
    ]
    assert snapshot() == before
    listed = login(acme_operator).get(reverse(LIST)).content.decode()
    assert f'{reverse("admin:pipeline_job_change", args=[Job.objects.get(operation_version=2).pk])}">v2' in listed


def test_the_rate_limit_refuses_with_the_time_to_wait_and_counts_the_refusal(acme_operator, settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 1, "REPROCESS_WINDOW_SECONDS": 3600}
    first, second, third = (factories.dead_letter("acme", f"broken-{n}") for n in range(3))
    response = confirm(login(acme_operator), first.pk, second.pk, third.pk)
    created, refused = texts(response)
    assert created == "Reprocessed 1 dead letter as a new version: acme:broken-0:v2."
    assert re.fullmatch(r"Tenant acme reached its reprocess limit: try again in (1 h|59 min)\. "
                        r"2 dead letters of acme were not reprocessed\.", refused)
    refusals = ReprocessRefusal.objects.order_by("dead_letter_id")  # each refused row is counted
    assert [(r.tenant, r.operator, r.dead_letter_id) for r in refusals] == [
        ("acme", "olivia", second.pk), ("acme", "olivia", third.pk)]
    assert all(3590 <= r.retry_after_seconds <= 3600 for r in refusals)
    quota = login(acme_operator).get(reverse(LIST)).content.decode()
    assert "acme 1 of 1 used, <strong>2 refused</strong>" in quota
    listed = login(acme_operator).get(reverse("admin:dlq_reprocessrefusal_changelist"))
    assert {r.pk for r in listed.context["cl"].result_list} == {r.pk for r in refusals}


def test_a_superuser_reprocesses_across_tenants(root):
    acme, globex = factories.dead_letter("acme", "broken-1"), factories.dead_letter("globex", "broken-1")
    response = confirm(login(root), acme.pk, globex.pk)
    assert texts(response) == [
        "Reprocessed 2 dead letters as new versions: acme:broken-1:v2, globex:broken-1:v2."
    ]
    assert set(AuditEntry.objects.values_list("operator", flat=True)) == {"root"}


def test_too_many_rows_at_once_are_refused(acme_operator, monkeypatch):
    monkeypatch.setattr(DeadLetterAdmin, "max_action_rows", 1)
    rows = [factories.dead_letter("acme", f"broken-{n}") for n in range(2)]
    before = snapshot()
    response = confirm(login(acme_operator), *[d.pk for d in rows])
    assert texts(response) == ["Select at most 1 rows for this action."]
    assert snapshot() == before
