"""Tenant isolation: lists, search, filters, change pages, history, timeline, actions and autocomplete."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dlq.models import AuditEntry, ReprocessRefusal
from dlq.services import reprocess_from_dlq
from pipeline.models import Job, OutboxEvent, Result, Review
from tests.admin import factories
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db

# Each admin page and how to find the acme row's id from a dead letter and a succeeded job.
PAGES = {
    "pipeline_job": lambda w: w["acme_job"].pk,
    "pipeline_result": lambda w: Result.objects.get(job=w["acme_job"]).pk,
    "pipeline_outboxevent": lambda w: OutboxEvent.objects.get(idempotency_key=w["acme_job"].idempotency_key).pk,
    "pipeline_review": lambda w: Review.objects.get(job=w["acme_job"]).pk,
    "pipeline_deadletter": lambda w: w["acme_dead"].pk,
    "dlq_auditentry": lambda w: w["acme_audit"].pk,
    "dlq_reprocessrefusal": lambda w: w["acme_refusal"].pk,
}


@pytest.fixture
def world(settings):
    """One of everything in acme and in globex; acme's refusal comes from a limit of one."""
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 1}
    rows = {}
    for tenant in ("acme", "globex"):
        rows[f"{tenant}_job"] = factories.succeeded(tenant, f"{tenant}-invoice-7")
        rows[f"{tenant}_dead"] = factories.dead_letter(tenant, f"{tenant}-broken-3")
    extra = factories.dead_letter("acme", "acme-broken-4")
    for tenant in ("acme", "globex"):  # after the factories: the new versions stay queued
        rows[f"{tenant}_audit"] = reprocess_from_dlq(rows[f"{tenant}_dead"].pk, "script", reason="retry").audit_entry
    with pytest.raises(Exception, match="reprocess limit"):
        reprocess_from_dlq(extra.pk, "script")
    rows["acme_refusal"] = ReprocessRefusal.objects.get(tenant="acme")
    return rows


@pytest.mark.parametrize("page", PAGES)
def test_the_list_shows_only_the_users_tenants(page, world, globex_operator, root):
    url = reverse(f"admin:{page}_changelist")
    mine = login(globex_operator).get(url)
    assert mine.status_code == 200
    tenants = {getattr(row, "tenant") for row in mine.context["cl"].result_list}
    assert tenants <= {"globex"}
    assert b"acme" not in mine.content  # not in rows, filters, counts or links
    everything = login(root).get(url)
    if page != "dlq_reprocessrefusal":
        assert {row.tenant for row in everything.context["cl"].result_list} == {"acme", "globex"}


@pytest.mark.parametrize("page", PAGES)
def test_another_tenants_object_is_a_404_like_a_missing_one(page, world, globex_operator, root):
    acme_id = PAGES[page](world)
    client = login(globex_operator)
    for view in ("change", "history"):
        assert client.get(reverse(f"admin:{page}_{view}", args=[acme_id])).status_code == 404
        assert client.get(reverse(f"admin:{page}_{view}", args=[10**9])).status_code == 404
    assert login(root).get(reverse(f"admin:{page}_change", args=[acme_id])).status_code == 200


@pytest.mark.parametrize("term_of", [
    lambda w: w["acme_job"].idempotency_key,
    lambda w: w["acme_job"].document_id,
    lambda w: f"acme:{w['acme_job'].document_id}",
    lambda w: "acme",
])
def test_search_never_finds_another_tenants_rows(world, globex_operator, acme_operator, term_of):
    term = term_of(world)
    for page in ("pipeline_job", "pipeline_review", "pipeline_result", "pipeline_outboxevent"):
        response = login(globex_operator).get(reverse(f"admin:{page}_changelist"), {"q": term})
        assert list(response.context["cl"].result_list) == [], page
    if term != "acme":
        found = login(acme_operator).get(reverse("admin:pipeline_job_changelist"), {"q": term})
        assert [j.pk for j in found.context["cl"].result_list] == [world["acme_job"].pk]


def test_dead_letter_search_by_key_document_and_tenant_document(world, globex_operator, acme_operator):
    dead = world["acme_dead"]
    for term in (dead.job.idempotency_key, dead.job.document_id, f"acme:{dead.job.document_id}"):
        url = reverse("admin:pipeline_deadletter_changelist")
        assert list(login(globex_operator).get(url, {"q": term}).context["cl"].result_list) == []
        assert [d.pk for d in login(acme_operator).get(url, {"q": term}).context["cl"].result_list] == [dead.pk]


def test_the_tenant_filter_offers_only_the_users_tenants_and_ignores_others(world, globex_operator, root):
    url = reverse("admin:pipeline_job_changelist")
    response = login(globex_operator).get(url)
    tenant_filter = next(f for f in response.context["cl"].filter_specs if f.parameter_name == "tenant")
    assert [value for value, _ in tenant_filter.lookup_choices] == ["globex"]
    forced = login(globex_operator).get(url, {"tenant": "acme"})
    assert list(forced.context["cl"].result_list) == []
    assert {j.tenant for j in login(root).get(url, {"tenant": "acme"}).context["cl"].result_list} == {"acme"}


def test_a_staff_user_without_tenants_sees_no_rows(world):
    nobody = factories.member("nobody", "initech")
    for page in PAGES:
        response = login(nobody).get(reverse(f"admin:{page}_changelist"))
        assert response.status_code == 200 and list(response.context["cl"].result_list) == [], page


def test_the_timeline_of_another_tenants_document_is_a_404(world, globex_operator, acme_operator):
    url = reverse("admin:pipeline_job_timeline", args=[world["acme_dead"].job_id])
    assert login(globex_operator).get(url).status_code == 404
    assert login(acme_operator).get(url).status_code == 200


def test_an_action_on_another_tenants_rows_changes_nothing(world, globex_operator, settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 100}
    acme_dead = world["acme_refusal"].dead_letter  # never reprocessed
    review = Review.objects.get(job=world["acme_job"])
    jobs, audits = Job.objects.count(), AuditEntry.objects.count()
    client = login(globex_operator)
    client.post(reverse("admin:pipeline_deadletter_changelist"), {
        "action": "reprocess", "_selected_action": [acme_dead.pk], "post": "yes", "reason": "sneaky",
    })
    client.post(reverse("admin:pipeline_review_changelist"), {
        "action": "approve", "_selected_action": [review.pk], "post": "yes",
    })
    assert (Job.objects.count(), AuditEntry.objects.count(), ReprocessRefusal.objects.count()) == (jobs, audits, 1)
    review.refresh_from_db()
    assert review.status == "pending"


def autocomplete(user, model_name: str, field_name: str, term: str) -> list[str]:
    response = login(user).get(reverse("admin:autocomplete"), {
        "app_label": "dlq", "model_name": model_name, "field_name": field_name, "term": term,
    })
    assert response.status_code == 200
    return [row["text"] for row in response.json()["results"]]


def test_autocomplete_goes_through_the_scoped_queryset(world, globex_operator, acme_operator):
    acme_key = world["acme_job"].idempotency_key
    assert autocomplete(globex_operator, "auditentry", "old_job", acme_key) == []
    assert autocomplete(acme_operator, "auditentry", "old_job", acme_key) == [acme_key]
    everything = autocomplete(globex_operator, "auditentry", "new_job", "")
    assert everything and all(text.startswith("globex:") for text in everything)
    assert all(text.startswith("globex:") for text in autocomplete(globex_operator, "reprocessrefusal", "dead_letter", ""))


def test_memberships_are_granted_by_superusers_with_valid_tenant_names(root, acme_operator):
    from tenancy.models import Membership

    url = reverse("admin:tenancy_membership_add")
    assert login(acme_operator).get(url).status_code == 403  # no role manages memberships
    refused = login(root).post(url, {"user": acme_operator.pk, "tenant": "Not A Tenant"})
    assert refused.status_code == 200 and "tenant_id: must match" in refused.content.decode()
    assert login(root).post(url, {"user": acme_operator.pk, "tenant": "globex"}).status_code == 302
    assert set(Membership.objects.filter(user=acme_operator).values_list("tenant", flat=True)) == {"acme", "globex"}


def test_the_view_on_site_shortcut_answers_the_same_404_for_existing_missing_and_foreign_rows(
    world, settings, acme_operator, globex_operator, root,
):
    """With DEBUG on Django's shortcut said "doesn't exist" for a missing row and "has no
    get_absolute_url" for an existing one, another tenant's included: now one answer for all."""
    from django.contrib.contenttypes.models import ContentType

    settings.DEBUG = True  # the technical 404 page, which shows the view's message
    targets = []
    for label, row_id in PAGES.items():
        app, model = label.split("_", 1)
        content_type = ContentType.objects.get(app_label=app, model=model).pk
        own, missing = row_id(world), 10_000_000
        targets += [(content_type, own), (content_type, missing)]
    targets += [(ContentType.objects.get(app_label="auth", model="user").pk, acme_operator.pk), (999_999, 1)]
    for user in (acme_operator, globex_operator, root):
        client = login(user)
        answers = set()
        for content_type, row in targets:
            path = f"/admin/r/{content_type}/{row}/"
            response = client.get(path)
            assert response.status_code == 404, path
            answers.add(response.content.decode().replace(path, "<path>").replace(f"{content_type}/{row}", "<ids>"))
        assert len(answers) == 1, user

