"""What a person sees, in Chromium: every page under the Content-Security-Policy, the sign-in lockout,
lists that fit the screen with long ids cut and whole on hover, times to the second, a recovered job
not labelled a failure, prefix search, and reprocess outcomes (a conflict is a message, not a 500)."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.conf import settings

from dlq.models import AuditEntry
from dlq.services import reprocess_from_dlq
from pipeline import queue, relay
from pipeline.models import Job
from pipeline.worker import process_once
from tests.admin import factories
from tests.browser.conftest import csp_violations, log_in
from tests.conftest import invoice

pytestmark = pytest.mark.browser

SECONDS = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def recovered_job(tenant: str, document_id: str) -> Job:
    """A job whose first attempt failed transiently (model unavailable) and whose second succeeded."""
    clock = factories.ago(hours=1)
    job, _ = queue.enqueue(tenant, document_id, 1, invoice(7, transient_failures=1), clock=clock)
    assert process_once("w-test", clock=clock).outcome == "retry"
    clock.advance(120)  # past the retry's backoff, well before the job's deadline
    assert process_once("w-test", clock=clock).outcome == "committed"
    relay.publish_pending(clock=clock)
    return Job.objects.get(pk=job.pk)


def test_every_admin_page_loads_under_the_content_security_policy(page, live_server):
    from playwright.sync_api import expect

    dead = factories.dead_letter("acme", "broken-1")
    job = factories.succeeded("acme", "invoice-1")
    reprocess_from_dlq(dead.pk, "script", reason="retry")
    factories.superuser()

    login = page.goto("/admin/login/")
    assert login is not None
    policy = login.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "style-src 'self'" in policy
    log_in(page, "root")
    urls = ["/admin/", f"/admin/pipeline/job/{job.pk}/change/", f"/admin/pipeline/job/{job.pk}/timeline/",
            f"/admin/pipeline/deadletter/{dead.pk}/change/", f"/admin/pipeline/review/{job.reviews.get().pk}/change/",
            f"/admin/review/{job.reviews.get().pk}/",
            "/admin/auth/user/add/", "/admin/tenancy/membership/add/"]
    urls += [f"/admin/{model._meta.app_label}/{model._meta.model_name}/" for model in admin.site._registry]
    for url in urls:
        response = page.goto(url)
        assert response is not None and response.status == 200, url
        assert "content-security-policy" in response.headers, url
        expect(page.locator("#content")).to_be_visible()
    # The review page's script ran (its keys work), and the reprocess confirmation, reached the way a person does.
    page.goto(f"/admin/review/{job.reviews.get().pk}/")
    page.keyboard.press("r")
    expect(page.locator("#id_reason")).to_be_focused()
    page.goto("/admin/pipeline/deadletter/")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "reprocess")
    page.click("button[name=index]")
    expect(page.locator("#id_reason")).to_be_visible()
    assert csp_violations(page) == []

    # The check itself: an inline style is refused and reported (so a page that used one would fail).
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">inline</p>')")
    page.wait_for_timeout(200)  # the console report is asynchronous; nothing else waits on it
    assert any("inline style" in violation for violation in csp_violations(page))
    page.csp_violations.clear()


def test_too_many_wrong_passwords_show_a_clear_lockout_page(page):
    from playwright.sync_api import expect

    factories.member("olivia", "acme")
    for n in range(settings.AXES_FAILURE_LIMIT):
        page.goto("/admin/login/")
        page.fill("#id_username", "olivia")
        page.fill("#id_password", f"Wrong-password-{n}")
        page.click("input[type=submit]")
    page.goto("/admin/login/")
    page.fill("#id_username", "olivia")
    page.fill("#id_password", factories.PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("h1")).to_have_text("Sign-in blocked")
    expect(page.locator("#lockout-message")).to_contain_text(
        f"Too many failed sign-ins ({settings.AXES_FAILURE_LIMIT}) for this username or from this address")
    expect(page.locator("#lockout-message")).to_contain_text("for 15 min")
    expect(page.locator("#content")).to_contain_text("ask an administrator to unlock it")
    assert page.goto("/admin/").url.endswith("/admin/login/?next=/admin/")  # not signed in


def test_a_long_document_id_is_cut_in_the_list_and_whole_on_hover(page):
    from playwright.sync_api import expect

    long_id = "scan-" + "0123456789abcdef" * 12  # 197 characters
    factories.queued("acme", long_id)
    factories.queued("acme", "short-1")
    factories.member("olivia", "acme")
    log_in(page, "olivia")
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto("/admin/pipeline/job/")
    cell = page.locator("#result_list tbody tr", has_text="scan-").locator("td.field-document span.relayops-clip")
    expect(cell).to_have_attribute("title", long_id)
    assert cell.bounding_box()["width"] < 300  # cut to one short line
    # Every column stays on the screen: the list needs no horizontal scrolling.
    assert page.evaluate("(() => { const r = document.querySelector('.results'); "
                         "return r.scrollWidth <= r.clientWidth; })()")
    table = page.locator("#result_list").bounding_box()
    assert table["x"] + table["width"] <= 1920
    key = page.locator("#result_list tbody tr", has_text="scan-").locator("th.field-key span.relayops-clip")
    expect(key).to_have_attribute("title", f"acme:{long_id}:v1")
    key.hover()  # the browser shows the title as the tooltip: the full value
    expect(page.locator("#result_list tbody tr", has_text="short-1").locator("td.field-document")).to_have_text(
        "short-1")


def test_lists_show_times_to_the_second_like_the_timeline(page):
    from playwright.sync_api import expect

    job = factories.succeeded("acme", "invoice-1")
    factories.member("olivia", "acme")
    log_in(page, "olivia")
    for url, column in (("/admin/pipeline/result/", "td.field-created_at"),
                        ("/admin/pipeline/outboxevent/", "td.field-published_at"),
                        ("/admin/pipeline/review/", "td.field-created_at")):
        page.goto(url)
        expect(page.locator(f"#result_list tbody tr {column}").first).to_have_text(SECONDS)
    page.goto(f"/admin/pipeline/job/{job.pk}/change/")
    expect(page.locator(".field-finished_at .readonly")).to_have_text(SECONDS)
    page.goto(f"/admin/pipeline/job/{job.pk}/timeline/")
    expect(page.locator("#versions tbody tr td").nth(4)).to_have_text(SECONDS)


def test_a_job_that_recovered_from_a_transient_failure_is_not_labelled_a_failure(page):
    from playwright.sync_api import expect

    job = recovered_job("acme", "INV-2002")
    assert (job.status, job.last_error_code) == ("succeeded", "extractor_unavailable")
    factories.member("olivia", "acme")
    log_in(page, "olivia")
    page.goto(f"/admin/pipeline/job/{job.pk}/timeline/")
    expect(page.locator("#versions tbody tr td.status")).to_have_text(
        "succeeded (recovered from extractor_unavailable)")
    page.goto(f"/admin/pipeline/job/{job.pk}/change/")
    expect(page.locator(".field-last_error .readonly")).to_have_text(
        "none (recovered from extractor_unavailable on an earlier attempt)")


def test_search_finds_documents_by_the_start_of_their_id(page):
    from playwright.sync_api import expect

    for document_id in ("INV-1001", "INV-1002", "INV-2001"):
        factories.queued("acme", document_id)
    factories.queued("globex", "INV-1003")
    factories.member("olivia", "acme")
    log_in(page, "olivia")
    page.goto("/admin/pipeline/job/")
    page.fill("#searchbar", "INV-10")
    page.press("#searchbar", "Enter")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#result_list")).not_to_contain_text("INV-2001")
    expect(page.locator("#result_list")).not_to_contain_text("INV-1003")


def test_reprocessing_into_an_existing_version_is_a_message_and_the_rest_of_the_batch_runs(page):
    from playwright.sync_api import expect

    conflict = factories.dead_letter("acme", "A-CONFLICT")
    fine = factories.dead_letter("acme", "A-FINE")
    queue.enqueue("acme", "A-CONFLICT", 2, invoice(9))
    factories.member("olivia", "acme")
    log_in(page, "olivia")
    page.goto("/admin/pipeline/deadletter/")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "reprocess")
    page.click("button[name=index]")
    page.fill("#id_reason", "vendor re-sent both")
    response_status: list[int] = []
    page.on("response", lambda response: response_status.append(response.status))
    page.click("input[type=submit][value='Reprocess as new version']")
    expect(page.locator(".messagelist .success")).to_have_text(
        "Reprocessed 1 dead letter as a new version: acme:A-FINE:v2.")
    expect(page.locator(".messagelist .error")).to_have_text(
        "Not reprocessed: acme:A-CONFLICT:v2 already exists with a different document and is queued; reprocessing "
        "the older version would conflict with it. Nothing was changed.")
    assert 500 not in response_status
    assert not AuditEntry.objects.filter(dead_letter=conflict).exists()
    assert Job.objects.filter(document_id="A-FINE", operation_version=2, reprocessed_from=fine.job).exists()
    assert not Job.objects.filter(document_id="A-CONFLICT", reprocessed_from__isnull=False).exists()
