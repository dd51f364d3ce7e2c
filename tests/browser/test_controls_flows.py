"""Operators acting on what they see, in a real browser: reprocess every matching dead letter (not only
the page's), and cancel a queued job from its page."""

from __future__ import annotations

import pytest

from dlq.models import AuditEntry
from pipeline import queue
from pipeline.models import Job
from pipeline.worker import process_once
from tests.admin import factories
from tests.browser.conftest import log_in

pytestmark = pytest.mark.browser


def test_an_operator_reprocesses_all_matching_dead_letters_across_pages(page):
    from playwright.sync_api import expect

    for n in range(60):  # more than a page of 50
        queue.enqueue("acme", f"scan-{n:02d}", 1, factories.UNREADABLE, max_attempts=1)
    while process_once("w-test").outcome != "idle":
        pass
    factories.member("olivia", "acme")
    log_in(page, "olivia")

    page.goto("/admin/pipeline/deadletter/?reprocessed=no")
    page.locator("#action-toggle").check()
    page.get_by_role("button", name="Select all 60").click()
    page.select_option("select[name=action]", "reprocess")
    page.click("button[name=index]")

    expect(page.locator(".selected-count")).to_contain_text("All 60 matching rows are selected")
    expect(page.locator("#same-failure-warning")).to_contain_text("60 of the selected dead letters")
    page.fill("#id_reason", "the scanner is fixed")
    page.click("input[type=submit][value='Reprocess as new version']")

    expect(page.locator(".messagelist .error")).to_contain_text("Tenant acme reached its reprocess limit")
    expect(page.locator(".messagelist .success")).to_contain_text("Reprocessed 20 dead letters as new versions")
    assert AuditEntry.objects.filter(action="reprocess").count() == 20


def test_an_operator_cancels_a_queued_job_from_its_page(page):
    from playwright.sync_api import expect

    job, _ = queue.enqueue("acme", "dup", 1, {"text": "whatever"})
    factories.member("olivia", "acme")
    log_in(page, "olivia")

    page.goto(f"/admin/pipeline/job/{job.pk}/change/")
    page.get_by_role("link", name="Cancel").click()
    page.fill("#id_reason", "sent twice")
    page.click("input[type=submit][value='Cancel']")

    expect(page.locator(".messagelist .success")).to_have_text(f"Cancel: job {job.pk} (acme:dup:v1) done.")
    expect(page.locator(".field-status .readonly")).to_have_text("Cancelled")
    assert Job.objects.get(pk=job.pk).status == "cancelled"
    assert AuditEntry.objects.get().reason == "sent twice"
