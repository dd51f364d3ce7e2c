"""Every human decision is on the record: the audit list, the document timeline, Django's admin history;
never with document content. The job's API answer shows the decision."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from dlq.models import AuditEntry
from pipeline.outbox import REVIEW_DECIDED_TOPIC
from review.decisions import decide
from tests.admin import factories, reviewing
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided(acme_operator):
    """Three reviews of acme: approved, rejected with a reason, corrected (vendor and total's inputs)."""
    approved = reviewing.review_of("acme", "inv-a")
    rejected = reviewing.review_of("acme", "inv-r")
    corrected = reviewing.review_of("acme", "inv-c")
    decide(approved.pk, "approve", acme_operator)
    decide(rejected.pk, "reject", acme_operator, reason="not our vendor")
    decide(corrected.pk, "correct", acme_operator, values={"vendor": "Secret Vendor GmbH", "invoice_number": "INV-77"})
    return {"approve": approved, "reject": rejected, "correct": corrected}


def test_the_audit_list_shows_decisions_next_to_reprocesses(decided, auditor, acme_operator):
    from dlq.services import reprocess_from_dlq

    reprocess_from_dlq(factories.dead_letter("acme", "broken").pk, acme_operator, reason="vendor re-sent it")
    html = login(auditor).get(reverse("admin:dlq_auditentry_changelist")).content.decode()
    for shown in ("Approve", "Reject", "Correct", "Reprocess", "not our vendor", "vendor re-sent it",
                  "corrected: invoice_number, vendor", "acme:inv-c:v1"):
        assert shown in html, shown
    assert "Secret Vendor" not in html and "INV-77" not in html
    filtered = login(auditor).get(reverse("admin:dlq_auditentry_changelist"), {"action__exact": "correct"})
    assert [e.review_id for e in filtered.context["cl"].result_list] == [decided["correct"].pk]


def test_the_timeline_shows_the_decision_without_content(decided, auditor):
    for decision, title, detail in (
        ("approve", "Review approved by olivia", "no reason given"),
        ("reject", "Review rejected by olivia", "reason: not our vendor"),
        ("correct", "Review corrected and approved by olivia", "corrected: invoice_number, vendor"),
    ):
        response = login(auditor).get(reverse("admin:pipeline_job_timeline", args=[decided[decision].job_id]))
        entries = response.context["timeline"].entries
        [entry] = [e for e in entries if e.kind == "decided"]
        assert entry.title == title and detail in entry.detail and entry.link == "admin:dlq_auditentry_change"
        assert not [e for e in entries if e.kind == "audited"]  # one entry per decision, not two
        html = response.content.decode()
        assert "Secret Vendor" not in html and "INV-77" not in html
    events = login(auditor).get(reverse("admin:pipeline_job_timeline", args=[decided["correct"].job_id]))
    assert REVIEW_DECIDED_TOPIC in events.content.decode()


def test_page_decisions_fill_recent_actions_and_the_review_history(acme_operator):
    review = reviewing.review_of("acme", "inv-h")
    client = login(acme_operator)
    client.post(reverse("admin:review_decide", args=[review.pk]), {"decision": "approve"})
    assert LogEntry.objects.count() == 1
    index = client.get(reverse("admin:index")).content.decode()
    assert "acme:inv-h:v1" in index  # "Recent actions"
    history = client.get(reverse("admin:pipeline_review_history", args=[review.pk])).content.decode()
    assert "Approved on the review page." in history


def test_the_reprocess_action_writes_the_dead_letters_admin_history(acme_operator):
    dead = factories.dead_letter("acme", "broken")
    client = login(acme_operator)
    client.post(reverse("admin:pipeline_deadletter_changelist"), {
        "action": "reprocess", "_selected_action": [dead.pk], "post": "yes", "reason": "readable now"})
    assert AuditEntry.objects.count() == 1
    log = LogEntry.objects.get()
    assert (log.object_id, log.user_id) == (str(dead.pk), acme_operator.pk)
    assert "Reprocessed as acme:broken:v2" in log.get_change_message()
