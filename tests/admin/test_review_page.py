"""The review page in the admin: what it shows, to whom, the decisions posted from it, the queue."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dlq.models import AuditEntry
from dlq.services import reprocess_from_dlq
from pipeline.clock import FrozenClock
from pipeline.models import Result, Review
from pipeline.relay import publish_pending
from pipeline.worker import process_once
from review.decisions import decide
from review.fields import flatten
from review.models import ReviewDecision
from tests.admin import factories, reviewing
from tests.admin.conftest import login
from tests.admin.test_review_decisions import everything

pytestmark = pytest.mark.django_db


def page_url(review) -> str:
    return reverse("admin:review_page", args=[review.pk])


def decide_url(review) -> str:
    return reverse("admin:review_decide", args=[review.pk])


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def review() -> Review:
    return reviewing.review_of("acme", "invoice-1", reviewing.fields(3))


def test_the_page_shows_the_invoice_beside_the_document(review, acme_operator):
    response = login(acme_operator).get(page_url(review))
    assert response.status_code == 200
    html = response.content.decode()
    assert "(the document text a reviewer reads)" in html
    for shown in ('value="INV-7"', 'value="Globex Supplies Ltd"', 'value="Item 3"', 'value="30.00"', 'value="36.00"',
                  "line 1 amount", "fake-model-1", "1200 in / 300 out", "No warning: the fields keep every rule",
                  "subtotal", 'id="approve"', 'id="correct"', 'id="reject"', 'id="next"', "review/review.js"):
        assert shown in html, shown
    assert "What changed since" not in html  # the first version has nothing to compare with


def test_the_page_shows_what_changed_since_the_previous_version(acme_operator):
    reviewing.review_of("acme", "invoice-2", reviewing.fields(2), version=1)
    v2 = reviewing.review_of("acme", "invoice-2", reviewing.fields(3, number="INV-8"), version=2)
    page = login(acme_operator).get(page_url(v2)).context["page"]
    assert page.versions == 2
    assert [(c.field, c.before, c.after) for c in page.previous.changes] == [
        ("invoice_number", "INV-7", "INV-8"), ("line_items.2.description", None, "Item 3"),
        ("line_items.2.quantity", None, "1"), ("line_items.2.unit_price", None, "10"),
        ("line_items.2.amount", None, "10.00"), ("subtotal", "20.00", "30.00"), ("tax", "4.00", "6.00"),
        ("total", "24.00", "36.00"),
    ]
    html = login(acme_operator).get(page_url(v2)).content.decode()
    assert "What changed since v1" in html and "line 3 description" in html


def test_a_reprocessed_document_names_why_its_previous_version_failed(acme_operator):
    dead = factories.dead_letter("acme", "invoice-3")
    reprocess_from_dlq(dead.pk, acme_operator, reason="readable now")
    v2 = dead.job.reprocessed_as.get()  # queued with the same unreadable text: this extractor reads it
    outcome = process_once("w-test", extractor=lambda document, checkpoint: reviewing.fields(1))
    assert outcome.job_id == v2.pk
    publish_pending()
    html = login(acme_operator).get(page_url(v2.reviews.get())).content.decode()
    assert "v1 was dead-lettered" in html and "permanent_error" in html
    assert "v1 has no result (dead_lettered): nothing to compare." in html


def test_content_is_escaped_on_the_page(acme_operator):
    hostile = "<script>alert('text')</script>"
    review = reviewing.review_of("acme", "xss", reviewing.fields(1, vendor='"><script>alert(1)</script>'), text=hostile)
    html = login(acme_operator).get(page_url(review)).content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;text&#x27;)&lt;/script&gt;" in html and "&quot;&gt;&lt;script&gt;alert(1)" in html


def test_a_result_outside_the_schema_is_shown_with_a_warning(acme_operator):
    odd = reviewing.review_of("acme", "odd", {"invoice_number": "X-1", "total": "12.50", "note": "extra"},
                              validate=False)

    html = login(acme_operator).get(page_url(odd)).content.decode()
    assert 'value="X-1"' in html and 'value="extra"' in html
    assert "the rules could not be checked" in html


def test_approving_from_the_page_moves_on_to_the_next_pending_review(review, acme_operator):
    later = reviewing.review_of("acme", "invoice-9")
    client = login(acme_operator)
    response = client.post(decide_url(review), {"decision": "approve"})
    assert response.status_code == 302 and response["Location"] == page_url(later)
    assert ReviewDecision.objects.get().decision == "approve"
    log = LogEntry.objects.get()
    assert (log.user_id, log.object_id, log.get_change_message()) == (
        acme_operator.pk, str(review.pk), "Approved on the review page.")
    assert "Globex" not in log.change_message and "Globex" not in log.object_repr


def test_correcting_from_the_page_posts_only_the_changed_fields(review, acme_operator):
    client = login(acme_operator)
    form = {f"field:{path}": value for path, value in _values(client, review).items()}
    form.update({"field:vendor": "Globex Supplies Limited", "decision": "correct", "reason": "letterhead"})
    response = client.post(decide_url(review), form, follow=True)
    assert messages_of(response)[0] == "Corrected and approved acme:invoice-1:v1."
    row = ReviewDecision.objects.get()
    assert (row.decision, row.corrected_fields, row.reason) == ("correct", ["vendor"], "letterhead")
    assert LogEntry.objects.get().get_change_message() == "Corrected and approved (vendor) on the review page."
    html = client.get(page_url(review)).content.decode()
    assert 'id="decision"' in html and "Globex Supplies Limited" in html and 'id="approve"' not in html


def _values(client, review) -> dict[str, str]:
    return flatten(client.get(page_url(review)).context["page"].fields)


def test_approve_with_changed_fields_is_refused_and_keeps_the_reviewers_values(review, acme_operator):
    before = everything()
    response = login(acme_operator).post(decide_url(review), {"decision": "approve", "field:vendor": "Other Ltd"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "Nothing was decided: you changed fields" in html and 'value="Other Ltd"' in html
    assert everything() == before


def test_a_bad_correction_is_shown_on_the_page_naming_the_field_or_rule(review, acme_operator):
    before = everything()
    client = login(acme_operator)
    bad = client.post(decide_url(review), {"decision": "correct", "field:line_items.1.amount": "ten"})
    assert bad.status_code == 400 and "must be a number" in bad.content.decode()
    broken = client.post(decide_url(review), {"decision": "correct", "field:total": "1.00"})
    assert broken.status_code == 400 and "break the rule total" in broken.content.decode()
    assert everything() == before


def test_reject_without_a_reason_is_refused(review, acme_operator):
    before = everything()
    response = login(acme_operator).post(decide_url(review), {"decision": "reject", "reason": ""})
    assert response.status_code == 400 and "a reason is required to reject" in response.content.decode()
    assert everything() == before
    response = login(acme_operator).post(decide_url(review), {"decision": "reject", "reason": "not our vendor"})
    assert response.status_code == 302
    assert AuditEntry.objects.get().reason == "not our vendor"


def test_deciding_twice_is_refused_and_changes_nothing(review, acme_operator):
    client = login(acme_operator)
    client.post(decide_url(review), {"decision": "approve"})
    before = everything()
    logs = LogEntry.objects.count()
    response = client.post(decide_url(review), {"decision": "reject", "reason": "changed my mind"}, follow=True)
    assert messages_of(response)[-1] == "Nothing was done: this review was already decided, and a decision is final."
    assert everything() == before and LogEntry.objects.count() == logs


@pytest.mark.parametrize("url", ["admin:review_page", "admin:review_next_after", "admin:review_decide"])
def test_another_tenants_review_is_a_404_like_a_missing_one(review, globex_operator, url):
    client = login(globex_operator)
    before = everything()
    method = client.post if url == "admin:review_decide" else client.get
    foreign = method(reverse(url, args=[review.pk]), {"decision": "approve"} if method == client.post else {})
    missing = method(reverse(url, args=[review.pk + 1000]), {"decision": "approve"} if method == client.post else {})
    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content
    assert everything() == before


@pytest.mark.parametrize("path", ["/admin/review/99999999999999999999999/", "/admin/review/-1/",
                                  "/admin/review/abc/", "/admin/review/1/decide/extra/"])
def test_odd_review_urls_are_404s_never_500s(acme_operator, path):
    assert login(acme_operator).get(path).status_code == 404


def test_the_queue_of_another_tenant_does_not_include_this_review(review, globex_operator):
    response = login(globex_operator).get(reverse("admin:review_next"))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:pipeline_review_changelist") + "?status__exact=pending"


@pytest.mark.parametrize("url", ["admin:review_page", "admin:review_next_after", "admin:review_decide"])
def test_an_auditor_cannot_open_or_decide(review, auditor, url):
    client = login(auditor)
    before = everything()
    response = (client.post(reverse(url, args=[review.pk]), {"decision": "approve"}) if url == "admin:review_decide"
                else client.get(reverse(url, args=[review.pk])))
    assert response.status_code == 403
    assert "Globex" not in response.content.decode()
    assert login(auditor).get(reverse("admin:review_next")).status_code == 403
    assert everything() == before


def test_an_auditor_sees_no_link_to_the_page_and_no_content_in_the_review_list(review, auditor, acme_operator):
    decide(review.pk, "correct", acme_operator, values={"vendor": "Globex Supplies Limited"})
    client = login(auditor)
    for url in (reverse("admin:pipeline_review_changelist"), reverse("admin:pipeline_review_change", args=[review.pk]),
                reverse("admin:dlq_auditentry_changelist"), reverse("admin:pipeline_job_timeline", args=[review.job_id])):
        html = client.get(url).content.decode()
        assert "Globex" not in html and "review page" not in html and "Review the oldest" not in html, url


def test_the_operators_review_list_links_to_the_page_and_the_queue(review, acme_operator):
    html = login(acme_operator).get(reverse("admin:pipeline_review_changelist")).content.decode()
    assert page_url(review) in html and reverse("admin:review_next") in html
    assert "Globex" not in html  # the list itself shows no content


def test_the_decide_url_answers_a_get_with_405(review, acme_operator):
    assert login(acme_operator).get(decide_url(review)).status_code == 405
    assert ReviewDecision.objects.count() == 0


def test_next_walks_the_queue_oldest_first_and_wraps(acme_operator):
    clock = FrozenClock
    base = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=3)
    oldest = reviewing.review_of("acme", "a", clock=clock(base))
    middle = reviewing.review_of("acme", "b", clock=clock(base + dt.timedelta(hours=1)))
    newest = reviewing.review_of("acme", "c", clock=clock(base + dt.timedelta(hours=2)))
    reviewing.review_of("globex", "g", clock=clock(base - dt.timedelta(hours=1)))  # older, another tenant's
    client = login(acme_operator)
    assert client.get(reverse("admin:review_next"))["Location"] == page_url(oldest)
    assert client.get(reverse("admin:review_next_after", args=[oldest.pk]))["Location"] == page_url(middle)
    assert client.get(reverse("admin:review_next_after", args=[newest.pk]))["Location"] == page_url(oldest)
    decide(middle.pk, "approve", acme_operator)
    assert client.get(reverse("admin:review_next_after", args=[oldest.pk]))["Location"] == page_url(newest)


def _queries(client, review) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(page_url(review))
    assert response.status_code == 200
    return len(captured)


PAGE_QUERIES = 11


def test_the_page_costs_the_same_queries_whatever_the_line_items_or_versions(acme_operator):
    client = login(acme_operator)
    small = reviewing.review_of("acme", "small", reviewing.fields(1))
    for version in (1, 2, 3, 4, 5):
        big = reviewing.review_of("acme", "big", reviewing.fields(40 + version), version=version)
    decide(small.pk, "approve", acme_operator)
    decide(big.pk, "correct", acme_operator, values={"vendor": "Changed Ltd"})
    counts = {_queries(client, small), _queries(client, big)}
    pending = reviewing.review_of("acme", "pending", reviewing.fields(2))
    counts.add(_queries(client, pending))
    assert counts == {PAGE_QUERIES}
    assert Result.objects.filter(job__document_id="big").count() == 5
