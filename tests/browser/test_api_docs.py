"""The API docs page in a real browser, under the production Content-Security-Policy: Swagger UI shows
every endpoint from our own static files, and nothing is refused or fetched from elsewhere (the page
fixture fails the test on any violation)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


def test_the_api_docs_page_shows_every_endpoint_under_the_csp(page, live_server):
    from playwright.sync_api import expect

    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto("/api/v1/docs")
    expect(page.get_by_role("heading", level=1)).to_contain_text("RelayOps ingest API")
    for path in ("/api/v1/documents", "/api/v1/jobs/{job_id}", "/api/v1/jobs/{job_id}/cancel",
                 "/api/v1/jobs/{job_id}/run-now", "/api/v1/documents/{document_id}"):
        expect(page.locator(".opblock-summary-path", has_text=path).first).to_be_visible()
    expect(page.locator("button.authorize")).to_be_visible()  # a bearer key can be given to try calls
    assert requested and [url for url in requested if not url.startswith((live_server.url, "data:"))] == []
