"""Browser tests: Playwright drives Debian's Chromium (/usr/bin/chromium) against pytest-django's live server.

Nothing is downloaded at run time: Playwright's bundled driver launches the system Chromium. Its sync
API runs an event loop in this thread, which makes Django refuse ORM calls here unless
DJANGO_ALLOW_ASYNC_UNSAFE is set; it is set only while the browser runs. Rows are made through the
services before the browser looks at them.

Pages are served with the production Content-Security-Policy (django-csp): every test fails if a page
it opened made Chromium report a violation (an inline script or style, a foreign resource).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from tenancy.roles import ensure_roles
from tests.admin import factories

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM} (Debian package 'chromium'; .ci/run installs it)")
    from playwright.sync_api import expect, sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    expect.set_options(timeout=10_000)
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def roles(transactional_db):
    """The live server needs committed rows; the flush after each test removes the groups too."""
    return ensure_roles()


def csp_violations(page) -> list[str]:
    """The Content-Security-Policy violations Chromium reported on ``page`` so far."""
    return page.csp_violations


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.csp_violations = []
    page.on("console", lambda message: page.csp_violations.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    yield page
    context.close()
    assert page.csp_violations == [], "pages broke the Content-Security-Policy"


def log_in(page, username: str) -> None:
    from playwright.sync_api import expect

    page.goto("/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", factories.PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(re.compile(r"/admin/$"))
