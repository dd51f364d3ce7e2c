"""The review page in a real browser, under the production CSP: an operator walks the queue and corrects
an invoice; an auditor reads the decision without seeing content; another tenant's operator gets 404s."""

from __future__ import annotations

import datetime as dt

import pytest

from dlq.models import AuditEntry
from pipeline.clock import FrozenClock
from pipeline.models import OutboxEvent, Result
from pipeline.outbox import REVIEW_DECIDED_TOPIC
from review.decisions import decide
from review.models import ReviewDecision
from tests.admin import factories, reviewing
from tests.browser.conftest import log_in

pytestmark = pytest.mark.browser

SECRET_TEXT = "(the document text a reviewer reads)"


def keys_ready(page) -> None:
    """Wait until the page shown has run its deferred script, whose handler reads the keys. A page reached
    by a click or a key is asserted on as soon as its URL and server-rendered text are there, which can be
    before that script ran: a key pressed then would go unheard."""
    page.wait_for_load_state("load")


def queue_of_three():
    """Three pending acme reviews, an hour apart: the oldest is invoice-a."""
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=3)
    return [reviewing.review_of("acme", f"invoice-{name}", reviewing.fields(2), clock=FrozenClock(
        start + dt.timedelta(hours=hour))) for hour, name in enumerate("abc")]


def test_an_operator_corrects_the_oldest_review_and_lands_on_the_next(page):
    from playwright.sync_api import expect

    oldest, following, _ = queue_of_three()
    factories.member("olivia", "acme")
    log_in(page, "olivia")

    page.goto("/admin/pipeline/review/")
    page.click("#start-reviewing")
    expect(page).to_have_url(f"/admin/review/{oldest.pk}/")
    expect(page.locator("h1")).to_have_text("Review of acme:invoice-a:v1")
    expect(page.locator("#document-text")).to_contain_text(SECRET_TEXT)
    expect(page.locator("#f-vendor")).to_have_value("Globex Supplies Ltd")
    expect(page.locator("#line-items tbody tr")).to_have_count(2)
    expect(page.locator("#f-total")).to_have_value("24.00")
    expect(page.locator("#attempt")).to_contain_text("fake-model-1")
    expect(page.locator("#validation")).to_contain_text("No warning")

    keys_ready(page)
    page.keyboard.press("c")  # the keyboard: c edits the first field
    expect(page.locator("#f-invoice_number")).to_be_focused()
    page.fill("#f-vendor", "Globex Supplies Limited")
    page.keyboard.press("Enter")  # a field changed: Enter corrects and approves

    expect(page).to_have_url(f"/admin/review/{following.pk}/")
    expect(page.locator(".messagelist .success")).to_have_text("Corrected and approved acme:invoice-a:v1.")
    expect(page.locator("h1")).to_have_text("Review of acme:invoice-b:v1")

    row = ReviewDecision.objects.get()
    assert (row.review_id, row.decision, row.corrected_fields) == (oldest.pk, "correct", ["vendor"])
    assert Result.objects.get(job_id=oldest.job_id).data["vendor"] == "Globex Supplies Ltd"
    event = OutboxEvent.objects.get(topic=REVIEW_DECIDED_TOPIC)
    assert event.payload["fields"]["vendor"] == "Globex Supplies Limited"
    assert AuditEntry.objects.get().action == "correct"

    keys_ready(page)
    page.keyboard.press("a")  # a approves the page shown, as extracted
    expect(page.locator(".messagelist .success")).to_have_text("Approved acme:invoice-b:v1.")
    expect(page.locator("h1")).to_have_text("Review of acme:invoice-c:v1")

    page.fill("#id_reason", "")
    page.click("#reject")  # no reason: refused, nothing decided
    expect(page.locator("#form-error")).to_contain_text("a reason is required to reject")
    assert ReviewDecision.objects.count() == 2

    keys_ready(page)
    page.keyboard.press("n")  # next: invoice-c is the only one left, so back to the list, told so
    expect(page.locator(".messagelist")).to_contain_text("No other review is pending in your tenants.")
    expect(page).to_have_url("/admin/pipeline/review/?status__exact=pending")


def test_an_auditor_sees_the_decision_in_the_audit_and_timeline_but_no_content_or_buttons(page):
    from playwright.sync_api import expect

    review = reviewing.review_of("acme", "invoice-a")
    olivia = factories.member("olivia", "acme")
    decide(review.pk, "correct", olivia, values={"vendor": "Globex Supplies Limited"}, reason="letterhead")
    factories.member("audrey", "acme", auditor=True)
    log_in(page, "audrey")

    page.goto("/admin/dlq/auditentry/")
    entry = page.locator("#result_list tbody tr", has_text="olivia")
    expect(entry).to_contain_text("Correct")
    expect(entry).to_contain_text("letterhead")
    expect(entry).to_contain_text("corrected: vendor")
    entry.get_by_role("link", name="timeline").click()
    expect(page.locator("#timeline")).to_contain_text("Review corrected and approved by olivia")
    expect(page.locator("#timeline")).to_contain_text("reason: letterhead")
    expect(page.locator("#timeline")).to_contain_text(REVIEW_DECIDED_TOPIC)
    expect(page.locator("body")).not_to_contain_text("Globex Supplies")

    page.goto("/admin/pipeline/review/")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#start-reviewing")).to_have_count(0)
    expect(page.locator("select[name=action]")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("Globex Supplies")

    response = page.goto(f"/admin/review/{review.pk}/")
    assert response is not None and response.status == 403
    expect(page.locator("body")).not_to_contain_text(SECRET_TEXT)
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#reject")).to_have_count(0)


def test_an_operator_of_another_tenant_gets_404_on_the_review_and_next_urls(page):
    from playwright.sync_api import expect

    review = reviewing.review_of("acme", "invoice-a")
    factories.member("gregor", "globex")
    log_in(page, "gregor")
    for url in (f"/admin/review/{review.pk}/", f"/admin/review/{review.pk}/next/"):
        response = page.goto(url)
        assert response is not None and response.status == 404, url
        expect(page.locator("body")).not_to_contain_text("invoice-a")
        expect(page.locator("body")).not_to_contain_text(SECRET_TEXT)
    page.goto("/admin/review/next/")  # gregor's own queue is empty: back to the list, told so
    expect(page.locator(".messagelist")).to_contain_text("No other review is pending in your tenants.")
    assert ReviewDecision.objects.count() == 0
