"""The controls in the admin: cancel and run-now (list actions and a job page's buttons), the tenant
controls list (pause, resume, the reprocess limit), the job page's links; permissions and tenant scope."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils.html import strip_tags

from dlq.models import AuditEntry
from dlq.ratelimit import ReprocessLimit
from pipeline import queue
from pipeline.errors import TransientError
from pipeline.models import Job
from pipeline.reasons import ErrorCode
from tenancy.models import TenantControl
from tests.admin import factories
from tests.admin.conftest import login
from tests.admin.factories import snapshot
from tests.conftest import invoice

pytestmark = pytest.mark.django_db
JOBS = "admin:pipeline_job_changelist"
CONTROLS = "admin:tenancy_tenantcontrol_changelist"


def texts(response) -> list[str]:
    return [strip_tags(str(m)) for m in get_messages(response.wsgi_request)]


def act(client, action: str, ids: list[int], reason: str | None = "duplicate upload", url: str = JOBS, **extra):
    data = {"action": action, "_selected_action": ids, **extra}
    if reason is not None:
        data.update(post="yes", reason=reason)
    else:
        data["index"] = "0"
    return client.post(reverse(url), data, follow=reason is not None)


def delayed(tenant: str, document: str) -> Job:
    job, _ = queue.enqueue(tenant, document, 1, invoice(1))
    lease = queue.lease_next("w")
    assert lease.job_id == job.pk
    queue.nack(lease, TransientError(ErrorCode.EXTRACTOR_UNAVAILABLE))
    return Job.objects.get(pk=job.pk)


def test_cancel_from_the_list_asks_for_a_reason_then_cancels_and_audits(acme_operator):
    jobs = [factories.queued("acme", f"doc-{n}") for n in range(2)]
    client = login(acme_operator)
    page = act(client, "cancel_jobs", [j.pk for j in jobs], reason=None)
    assert page.status_code == 200 and "reason" in page.context["form"].fields
    assert set(Job.objects.values_list("status", flat=True)) == {"queued"}
    done = act(client, "cancel_jobs", [j.pk for j in jobs])
    assert texts(done) == ["Cancel: 2 jobs done."]
    assert set(Job.objects.values_list("status", flat=True)) == {"cancelled"}
    assert sorted(AuditEntry.objects.values_list("action", "operator", "reason", "job_id")) == [
        ("cancel", "olivia", "duplicate upload", j.pk) for j in jobs]
    timeline = client.get(reverse("admin:pipeline_job_timeline", args=[jobs[0].pk])).content.decode()
    assert "Cancel by olivia" in timeline and "reason: duplicate upload" in timeline


def test_a_finished_job_in_the_selection_is_left_and_said_so(acme_operator):
    done = factories.succeeded("acme", "done")
    live = factories.queued("acme", "live")
    response = act(login(acme_operator), "cancel_jobs", [live.pk, done.pk])
    assert texts(response)[0] == "Cancel: 1 job done."
    assert "is succeeded: only a queued or leased job can be cancelled" in texts(response)[1]
    assert Job.objects.get(pk=done.pk).status == "succeeded"


def test_run_now_from_the_job_page(acme_operator):
    job = delayed("acme", "flaky")
    client = login(acme_operator)
    page = client.get(reverse("admin:pipeline_job_change", args=[job.pk]))
    run_url = reverse("admin:pipeline_job_run_now", args=[job.pk])
    assert run_url in page.content.decode() and reverse("admin:pipeline_job_cancel", args=[job.pk]) in page.content.decode()
    assert client.get(run_url).status_code == 200
    assert client.post(run_url, {"reason": ""}).status_code == 200  # the form again: a reason is required
    assert Job.objects.get(pk=job.pk).visible_at == job.visible_at
    response = client.post(run_url, {"reason": "extractor is back"}, follow=True)
    assert texts(response) == [f"Run now: job {job.pk} (acme:flaky:v1) done."]
    assert Job.objects.get(pk=job.pk).visible_at < job.visible_at
    assert AuditEntry.objects.get().action == "run_now"


def test_another_tenants_job_is_a_404_on_every_control_and_changes_nothing(acme_operator):
    foreign = factories.queued("globex", "theirs")
    client = login(acme_operator)
    before = snapshot()
    for name in ("cancel", "run_now"):
        url = reverse(f"admin:pipeline_job_{name}", args=[foreign.pk])
        assert client.get(url).status_code == 404
        assert client.post(url, {"reason": "x"}).status_code == 404
        assert client.post(reverse(f"admin:pipeline_job_{name}", args=[99999]), {"reason": "x"}).status_code == 404
    response = act(client, "cancel_jobs", [foreign.pk])
    assert "not in your tenants" in texts(response)[0]
    assert snapshot() == before


def test_an_auditor_is_offered_no_control_and_a_forged_post_is_refused(auditor):
    job = factories.queued("acme", "doc")
    client = login(auditor)
    page = client.get(reverse("admin:pipeline_job_change", args=[job.pk]))
    assert page.status_code == 200 and "job-control" not in page.content.decode()
    before = snapshot()
    assert client.post(reverse("admin:pipeline_job_cancel", args=[job.pk]), {"reason": "x"}).status_code == 403
    assert act(client, "cancel_jobs", [job.pk]).status_code == 403
    assert act(client, "pause", [], url=CONTROLS).status_code == 403
    assert snapshot() == before


def test_the_job_page_links_its_dead_letter_and_its_review(acme_operator):
    dead = factories.dead_letter("acme", "broken")
    done = factories.succeeded("acme", "good")
    client = login(acme_operator)
    page = client.get(reverse("admin:pipeline_job_change", args=[dead.job_id])).content.decode()
    assert reverse("admin:pipeline_deadletter_change", args=[dead.pk]) in page
    review = done.reviews.get()
    page = client.get(reverse("admin:pipeline_job_change", args=[done.pk])).content.decode()
    assert reverse("admin:pipeline_review_change", args=[review.pk]) in page


def test_tenant_controls_list_the_users_tenants_and_pause_and_resume_them(acme_operator, globex_operator):
    client = login(acme_operator)
    listed = client.get(reverse(CONTROLS))
    assert [c.tenant for c in listed.context["cl"].result_list] == ["acme"]  # never globex
    acme = TenantControl.objects.get(tenant="acme")
    factories.queued("acme", "doc")
    response = act(client, "pause", [acme.pk], reason="upstream sends garbage", url=CONTROLS)
    assert texts(response) == ["Pause intake: 1 tenant done."]
    assert TenantControl.objects.get(tenant="acme").intake_paused
    assert queue.lease_next("w") is None
    page = client.get(reverse(CONTROLS)).content.decode()
    assert "<strong>paused</strong> for" in page
    job = Job.objects.get()
    assert 'id="intake-paused"' in client.get(reverse("admin:pipeline_job_change", args=[job.pk])).content.decode()
    act(client, "resume", [acme.pk], reason="fixed", url=CONTROLS)
    assert queue.lease_next("w").job_id == job.pk
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == ["pause_intake", "resume_intake"]
    # globex's operator cannot reach acme's control, even by forging its id
    before = snapshot()
    forged = act(login(globex_operator), "pause", [acme.pk], url=CONTROLS)
    assert "not in your tenants" in texts(forged)[0] and snapshot() == before
    assert not TenantControl.objects.get(tenant="acme").intake_paused


def test_the_reprocess_limit_needs_its_own_permission(acme_operator, root):
    client = login(acme_operator)
    client.get(reverse(CONTROLS))
    acme = TenantControl.objects.get(tenant="acme")
    assert "set_limit" not in client.get(reverse(CONTROLS)).context["action_form"].fields["action"].choices.__repr__()
    assert act(client, "set_limit", [acme.pk], limit="500", url=CONTROLS).status_code == 403
    assert ReprocessLimit.for_tenant("acme").limit == 20
    # a superuser grants it to the operator leading a planned recovery
    acme_operator.user_permissions.add(Permission.objects.get(codename="set_reprocess_limit"))
    client = login(type(acme_operator).objects.get(pk=acme_operator.pk))
    response = act(client, "set_limit", [acme.pk], limit="500", reason="planned recovery of March", url=CONTROLS)
    assert texts(response) == ["Set the reprocess limit: 1 tenant done."]
    assert ReprocessLimit.for_tenant("acme").limit == 500
    entry = AuditEntry.objects.get(action="set_reprocess_limit")
    assert (entry.operator, entry.detail) == ("olivia", "20 -> 500 per 1 h")
    act(client, "set_limit", [acme.pk], limit="", reason="back to normal", url=CONTROLS)
    assert ReprocessLimit.for_tenant("acme").limit == 20
    assert "20 per 1 h (default)" in client.get(reverse(CONTROLS)).content.decode()
