"""What operators and auditors do in the admin, in a real browser: reprocess, read the history, stay in their tenant."""

from __future__ import annotations

import pytest

from dlq.models import AuditEntry
from dlq.services import reprocess_from_dlq
from pipeline.models import Job
from tests.admin import factories
from tests.browser.conftest import log_in

pytestmark = pytest.mark.browser

REASON = "vendor re-sent a readable scan"


def test_an_operator_reprocesses_a_dead_letter_and_sees_version_2_and_its_audit_entry(page):
    from playwright.sync_api import expect

    dead = factories.dead_letter("acme", "invoice-7")
    factories.member("olivia", "acme")
    log_in(page, "olivia")

    page.goto("/admin/pipeline/deadletter/")
    row = page.locator("#result_list tbody tr", has_text="acme:invoice-7:v1")
    expect(row).to_contain_text("permanent_error")
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "reprocess")
    page.click("button[name=index]")

    expect(page.locator("h1")).to_have_text("Reprocess dead letters as new versions")
    expect(page.locator(".selected-rows")).to_contain_text("acme:invoice-7:v1")
    page.fill("#id_reason", REASON)
    page.click("input[type=submit][value='Reprocess as new version']")

    success = page.locator(".messagelist .success")
    expect(success).to_have_text("Reprocessed 1 dead letter as a new version: acme:invoice-7:v2.")
    success.get_by_role("link", name="acme:invoice-7:v2").click()
    expect(page.locator(".field-operation_version .readonly")).to_have_text("2")
    expect(page.locator(".field-status .readonly")).to_have_text("Queued")

    page.goto("/admin/dlq/auditentry/")
    entry = page.locator("#result_list tbody tr")
    expect(entry).to_have_count(1)
    for shown in ("olivia", REASON, "acme:invoice-7:v1", "acme:invoice-7:v2"):
        expect(entry).to_contain_text(shown)

    audit = AuditEntry.objects.get()
    assert (audit.operator, audit.reason, audit.dead_letter_id) == ("olivia", REASON, dead.pk)
    assert Job.objects.get(pk=audit.new_job_id).operation_version == 2


def test_an_auditor_reads_the_history_and_has_no_reprocess_action(page):
    from playwright.sync_api import expect

    dead = factories.dead_letter("acme", "invoice-7")
    olivia = factories.member("olivia", "acme")
    reprocess_from_dlq(dead.pk, olivia, reason=REASON)
    factories.member("audrey", "acme", auditor=True)
    log_in(page, "audrey")

    page.goto("/admin/dlq/auditentry/")
    entry = page.locator("#result_list tbody tr", has_text="olivia")
    expect(entry).to_contain_text(REASON)
    entry.get_by_role("link", name="timeline").click()
    expect(page.locator("h1")).to_have_text("Timeline of acme:invoice-7")
    expect(page.locator("#versions tbody tr")).to_have_count(2)
    expect(page.locator("#timeline")).to_contain_text("Dead-lettered: permanent_error")
    expect(page.locator("#timeline")).to_contain_text("Reprocessed by olivia as version 2")
    expect(page.locator("#timeline")).to_contain_text(f"reason: {REASON}")

    page.goto("/admin/pipeline/deadletter/")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("select[name=action]")).to_have_count(0)
    expect(page.locator("input.action-select")).to_have_count(0)
    expect(page.get_by_text("Reprocess as new version")).to_have_count(0)

    # A hand-made POST from the auditor's own session, with a valid CSRF token: refused, nothing changes.
    status = page.evaluate(
        """async (id) => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const body = new URLSearchParams({action: "reprocess", _selected_action: id, post: "yes", reason: "x"});
            const response = await fetch(location.pathname, {method: "POST", body, headers: {"X-CSRFToken": token}});
            return response.status;
        }""",
        str(dead.pk),
    )
    assert status == 403
    assert AuditEntry.objects.count() == 1 and Job.objects.count() == 2


def test_an_operator_of_another_tenant_cannot_reach_the_dead_letter(page):
    from playwright.sync_api import expect

    acme = factories.dead_letter("acme", "invoice-7")
    factories.dead_letter("globex", "invoice-8")
    factories.member("gregor", "globex")
    log_in(page, "gregor")

    page.goto("/admin/pipeline/deadletter/")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("globex:invoice-8:v1")
    expect(page.locator("#content")).not_to_contain_text("acme")

    for term in ("acme:invoice-7:v1", "invoice-7", "acme:invoice-7"):
        page.fill("#searchbar", term)
        page.press("#searchbar", "Enter")
        expect(page.locator("#changelist-form")).to_contain_text("0 dead letters")
        expect(page.locator("#result_list")).to_have_count(0)

    for url in (f"/admin/pipeline/deadletter/{acme.pk}/change/", f"/admin/pipeline/job/{acme.job_id}/change/",
                f"/admin/pipeline/job/{acme.job_id}/timeline/"):
        response = page.goto(url)
        assert response is not None and response.status == 404, url
        expect(page.locator("body")).not_to_contain_text("invoice-7")
