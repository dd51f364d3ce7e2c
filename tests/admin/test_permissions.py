"""Every action behind its permission; forged POSTs are 403 and change nothing; pipeline rows are read-only."""

from __future__ import annotations

import pytest

from controls.actors import Actor
from controls.services import pause_intake
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from dlq.services import reprocess_from_dlq
from pipeline.errors import ReprocessRateLimitedError
from tests.admin import factories
from tests.admin.conftest import login
from tests.admin.factories import snapshot

pytestmark = pytest.mark.django_db

PAGES = [
    "pipeline_job", "pipeline_result", "pipeline_outboxevent", "pipeline_review",
    "pipeline_deadletter", "dlq_auditentry", "dlq_reprocessrefusal", "tenancy_tenantcontrol",
]


@pytest.fixture
def rows(settings):
    """Something on every page: a reprocessed dead letter, a refused one (limit 1), a pending review, a paused
    tenant."""
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 1}
    dead = factories.dead_letter("acme", "broken-1")
    job = factories.succeeded("acme", "invoice-1")
    other_dead = factories.dead_letter("acme", "broken-2")
    reprocess_from_dlq(dead.pk, "script", reason="first")
    with pytest.raises(ReprocessRateLimitedError):
        reprocess_from_dlq(other_dead.pk, "script", reason="second")
    pause_intake("acme", Actor.command("script"), reason="incident")
    return {"dead": other_dead, "review": job.reviews.get(), "job": job}


def reprocess_post(dead_id: int) -> dict:
    return {"action": "reprocess", "_selected_action": [dead_id], "post": "yes", "reason": "because"}


def approve_post(review_id: int) -> dict:
    return {"action": "approve", "_selected_action": [review_id], "post": "yes"}


def offered_actions(client: Client, page: str) -> list[str]:
    form = client.get(reverse(f"admin:{page}_changelist")).context["action_form"]
    return [] if form is None else [name for name, _ in form.fields["action"].choices if name]


def test_operators_are_offered_reprocess_and_decide_reviews_on_the_review_page(rows, acme_operator):
    client = login(acme_operator)
    assert offered_actions(client, "pipeline_deadletter") == ["reprocess"]
    assert offered_actions(client, "pipeline_review") == []  # no bulk decision: one at a time, on the page
    assert client.get(reverse("admin:review_page", args=[rows["review"].pk])).context["can_decide"] is True
    assert offered_actions(client, "pipeline_job") == ["cancel_jobs", "run_jobs_now"]
    assert offered_actions(client, "tenancy_tenantcontrol") == ["pause", "resume"]  # not the limit: no role has it
    assert offered_actions(client, "pipeline_outboxevent") == ["redeliver"]
    for page in ("pipeline_result", "dlq_auditentry", "dlq_reprocessrefusal"):
        assert offered_actions(client, page) == [], page


def test_auditors_see_everything_and_are_offered_nothing(rows, auditor):
    client = login(auditor)
    for page in PAGES:
        response = client.get(reverse(f"admin:{page}_changelist"))
        assert response.status_code == 200 and response.context["action_form"] is None, page
        assert b"Reprocess as new version" not in response.content


@pytest.mark.parametrize("page, post", [
    ("pipeline_deadletter", lambda rows: reprocess_post(rows["dead"].pk)),
    ("pipeline_review", lambda rows: approve_post(rows["review"].pk)),
    ("pipeline_review", lambda rows: {**approve_post(rows["review"].pk), "action": "reject"}),
])
def test_an_auditors_forged_action_is_403_and_changes_nothing(rows, auditor, page, post):
    before = snapshot()
    for data in (post(rows), {**post(rows), "post": ""}, {**post(rows), "index": "0"}):  # confirm, ask, list form
        assert login(auditor).post(reverse(f"admin:{page}_changelist"), data).status_code == 403
    assert snapshot() == before


def test_each_action_needs_its_own_permission(rows):
    """A user who may reprocess but not decide: offered the one, refused the other."""
    user = get_user_model().objects.create_user("half", password=factories.PASSWORD, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(
        codename__in=["view_deadletter", "view_review", "reprocess_deadletter"]
    ))
    from tenancy.models import Membership

    Membership.objects.create(user=user, tenant="acme")
    client = login(user)
    assert offered_actions(client, "pipeline_deadletter") == ["reprocess"]
    assert offered_actions(client, "pipeline_review") == []
    before = snapshot()
    assert client.post(reverse("admin:pipeline_review_changelist"), approve_post(rows["review"].pk)).status_code == 403
    assert client.get(reverse("admin:review_page", args=[rows["review"].pk])).status_code == 403
    assert client.post(reverse("admin:review_decide", args=[rows["review"].pk]), {"decision": "approve"}).status_code == 403
    assert snapshot() == before


def test_seeing_content_is_not_enough_to_decide(rows):
    """A user who may see the review page's content but not decide: the page has no buttons, a POST is 403."""
    user = get_user_model().objects.create_user("reader", password=factories.PASSWORD, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_review", "view_document_content"]))
    from tenancy.models import Membership

    Membership.objects.create(user=user, tenant="acme")
    client = login(user)
    page = client.get(reverse("admin:review_page", args=[rows["review"].pk]))
    assert page.status_code == 200 and page.context["can_decide"] is False and b'id="approve"' not in page.content
    before = snapshot()
    assert client.post(reverse("admin:review_decide", args=[rows["review"].pk]), {"decision": "approve"}).status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("action", ["delete_selected", "no_such_action", "approve"])
def test_forged_actions_that_no_admin_offers_are_403_even_for_superusers(rows, root, action):
    before = snapshot()
    for page in ("pipeline_job", "pipeline_deadletter", "dlq_auditentry"):
        response = login(root).post(reverse(f"admin:{page}_changelist"), {
            "action": action, "_selected_action": [1, 2, 3], "post": "yes", "index": "0",
        })
        assert response.status_code == 403, page
    assert snapshot() == before


@pytest.mark.parametrize("page", PAGES)
def test_pipeline_rows_cannot_be_added_changed_or_deleted_by_anyone(rows, root, page):
    from django.apps import apps

    model = apps.get_model(*page.split("_", 1))
    obj = model.objects.first()
    assert obj is not None
    before = snapshot()
    client = login(root)
    assert client.get(reverse(f"admin:{page}_add")).status_code == 403
    assert client.post(reverse(f"admin:{page}_add"), {}).status_code == 403
    assert client.post(reverse(f"admin:{page}_change", args=[obj.pk]), {"tenant": "globex"}).status_code == 403
    assert client.get(reverse(f"admin:{page}_delete", args=[obj.pk])).status_code == 403
    assert client.post(reverse(f"admin:{page}_delete", args=[obj.pk]), {"post": "yes"}).status_code == 403
    page_html = client.get(reverse(f"admin:{page}_change", args=[obj.pk])).content
    assert b'name="_save"' not in page_html and b"deletelink" not in page_html
    assert snapshot() == before


def test_staff_without_a_role_cannot_open_the_pages(rows):
    user = get_user_model().objects.create_user("nobody", password=factories.PASSWORD, is_staff=True)
    for page in PAGES:
        assert login(user).get(reverse(f"admin:{page}_changelist")).status_code == 403, page
    assert login(user).get(reverse("admin:pipeline_job_timeline", args=[rows["job"].pk])).status_code == 403


def test_anonymous_users_are_sent_to_the_login_page(rows):
    response = Client().get(reverse("admin:pipeline_deadletter_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    response = Client().post(reverse("admin:pipeline_deadletter_changelist"), reprocess_post(rows["dead"].pk))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_csrf_is_enforced_on_actions(rows, acme_operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(acme_operator)
    before = snapshot()
    assert client.post(reverse("admin:pipeline_deadletter_changelist"), reprocess_post(rows["dead"].pk)).status_code == 403
    assert client.post(reverse("admin:pipeline_review_changelist"), approve_post(rows["review"].pk)).status_code == 403
    assert client.post(reverse("admin:review_decide", args=[rows["review"].pk]), {"decision": "approve"}).status_code == 403
    assert snapshot() == before


def test_django_q_pages_are_for_superusers_and_offer_nothing_to_resubmit(acme_operator, auditor, root):
    """The cluster takes no django-q2 task (its broker has no queue): no resubmit action, no queue page."""
    from django.urls import NoReverseMatch

    for user in (acme_operator, auditor):
        assert login(user).get(reverse("admin:django_q_success_changelist")).status_code == 403
        assert login(user).get(reverse("admin:django_q_failure_changelist")).status_code == 403
    superuser = login(root)
    assert superuser.get(reverse("admin:django_q_failure_changelist")).status_code == 200
    assert "resubmit_task" not in offered_actions(superuser, "django_q_failure")
    assert "resubmit_task" not in offered_actions(superuser, "django_q_success")
    with pytest.raises(NoReverseMatch):
        reverse("admin:django_q_ormq_changelist")
