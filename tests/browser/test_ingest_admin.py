"""The front door in the admin, in a real browser: an operator revokes an API key (which the API then
refuses), and reads a job's per-attempt spend and failed rule without seeing the document."""

from __future__ import annotations

import pytest
from django.test import Client

from ingest.keys import create_api_key
from pipeline import queue
from pipeline.extraction import synthetic
from pipeline.worker import process_once
from tests.admin import factories
from tests.browser.conftest import log_in

pytestmark = pytest.mark.browser


def test_an_operator_revokes_a_key_and_the_api_refuses_it(page):
    from playwright.sync_api import expect

    mine = create_api_key("acme", "billing-bot")
    create_api_key("globex", "ap-bot")
    factories.member("olivia", "acme")
    log_in(page, "olivia")

    page.goto("/admin/ingest/apikey/")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)  # globex's key is not listed
    row = rows.filter(has_text="billing-bot")
    expect(row).to_contain_text(f"rk_{mine.key.prefix}_")
    expect(row).to_contain_text("live")
    expect(page.locator("body")).not_to_contain_text(mine.raw)
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "revoke")
    page.click("button[name=index]")
    expect(page.locator("h1")).to_have_text("Revoke API keys")
    page.click("input[type=submit][value='Yes, revoke them']")
    expect(page.locator(".messagelist .success")).to_have_text(
        "Revoked 1 API key(s): their next request is refused.")
    expect(rows.filter(has_text="billing-bot")).to_contain_text("revoked")

    answer = Client().get("/api/v1/jobs/1", headers={"Authorization": f"Bearer {mine.raw}"})
    assert answer.status_code == 401 and answer.json()["errors"][0] == {"field": "API key", "problem": "was revoked"}


def test_an_operator_sees_each_attempts_spend_and_the_failed_rule_not_the_document(page):
    from playwright.sync_api import expect

    bad = synthetic.failing("subtotal", 4)
    job, _ = queue.enqueue("acme", "inv-4", 1, bad.payload)
    assert process_once("w1").outcome == "dead_lettered"
    factories.member("olivia", "acme")
    log_in(page, "olivia")

    page.goto(f"/admin/pipeline/job/{job.pk}/change/")
    spend = page.locator("table.attempt-spend tbody tr")
    expect(spend).to_have_count(1)
    for shown in ("validation_failed", "subtotal", "rules"):
        expect(spend).to_contain_text(shown)
    page.goto("/admin/pipeline/deadletter/")
    expect(page.locator("#result_list tbody tr", has_text="acme:inv-4:v1")).to_contain_text("subtotal")
    page.goto(f"/admin/pipeline/job/{job.pk}/timeline/")
    expect(page.locator("#timeline")).to_contain_text("Attempt failed: validation_failed (rule subtotal)")
    vendor = bad.text.splitlines()[0]
    expect(page.locator("body")).not_to_contain_text(vendor)
