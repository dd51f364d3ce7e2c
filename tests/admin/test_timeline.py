"""The document timeline: "why are there two versions of this invoice?" answered from one page."""

from __future__ import annotations

import pytest
from django.test.utils import CaptureQueriesContext
from django.db import connection
from django.urls import reverse

from pipeline.models import DeadLetter
from dlq.services import reprocess_from_dlq
from pipeline import queue, relay
from pipeline.models import Job, Result
from pipeline.maintenance.rescuer import LeaseRescuer
from pipeline.reviews import decide_review
from pipeline.worker import process_once
from tests.admin import factories
from tests.admin.conftest import login
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


@pytest.fixture
def story(acme_operator):
    """Invoice 42: both of v1's workers die (the second took over with fence 2), the rescuer
    dead-letters it, olivia reprocesses; v2's first worker stalls, a second takes over with fence 2
    and commits; the event is published; olivia approves."""
    clock = factories.ago(hours=2)
    v1, _ = queue.enqueue("acme", "invoice-42", 1, invoice(42), max_lease_expiries=1, clock=clock)
    for worker in ("w-crashed", "w-crashed-too"):
        assert queue.lease_next(worker, lease_seconds=30, clock=clock) is not None
        clock.advance(60)
    assert LeaseRescuer().run_once(clock.now()).dead_lettered == 1
    clock.advance(60)
    dead = DeadLetter.objects.get(job=v1)
    v2 = reprocess_from_dlq(dead.pk, acme_operator, reason="worker host rebooted mid-run", clock=clock).new_job
    clock.advance(1)
    assert queue.lease_next("w-stalled", lease_seconds=30, clock=clock) is not None
    clock.advance(60)
    assert process_once("w-good", clock=clock).outcome == "committed"
    clock.advance(1)
    assert relay.publish_pending(clock=clock).published == 1
    clock.advance(300)
    decide_review(v2.reviews.get().pk, "approved", acme_operator, clock=clock)
    return {"v1": v1, "v2": Job.objects.get(pk=v2.pk), "dead": dead}


def page(user, job_id):
    return login(user).get(reverse("admin:pipeline_job_timeline", args=[job_id]))


def test_the_timeline_tells_the_whole_story_in_order(story, auditor):
    response = page(auditor, story["v2"].pk)
    assert response.status_code == 200
    entries = response.context["timeline"].entries
    assert [(e.version, e.kind) for e in entries] == [
        (1, "enqueued"), (1, "leased"), (1, "attempt_ended"), (1, "leased"), (1, "attempt_ended"),
        (1, "dead_lettered"), (1, "reprocessed"),
        (2, "enqueued"), (2, "leased"), (2, "attempt_ended"), (2, "leased"), (2, "committed"), (2, "event"),
        (2, "finished"), (2, "published"), (2, "handed_off"), (2, "decided"),
    ]
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    origins = response.context["timeline"].origins
    assert [(job.operation_version, origin and origin.operation_version) for job, origin in origins] == [
        (1, None), (2, 1)]
    html = response.content.decode()
    for said in (
        "Lease expired: worker crashed or stalled",  # v1's crash and v2's stall
        "worker w-crashed</td>", "worker w-crashed-too", "Leased (fence 2)", "worker w-good",
        "Dead-lettered: lease_expiries_exceeded", "last error lease_expired",
        "Reprocessed by olivia as version 2", "reason: worker host rebooted mid-run",
        "Result committed", "with fence 2", "Event published", "Review approved by olivia", "waited 5 min",
    ):
        assert said in html, said


def test_the_same_page_from_either_version(story, auditor):
    first = page(auditor, story["v1"].pk).context["timeline"]
    second = page(auditor, story["v2"].pk).context["timeline"]
    assert first.entries == second.entries and [j.pk for j in first.versions] == [story["v1"].pk, story["v2"].pk]


def test_no_document_content_is_shown(story, auditor):
    result = Result.objects.get()
    client = login(auditor)
    for url in (
        reverse("admin:pipeline_job_timeline", args=[story["v2"].pk]),
        reverse("admin:pipeline_job_change", args=[story["v2"].pk]),
        reverse("admin:pipeline_result_change", args=[result.pk]),
        reverse("admin:pipeline_job_changelist"),
        reverse("admin:pipeline_result_changelist"),
    ):
        html = client.get(url).content.decode()
        for secret in (result.data["vendor"], result.data["vendor_tax_id"], result.data["total"],
                       result.data["invoice_number"], result.data["line_items"][0]["description"]):
            assert secret not in html, (url, secret)


def test_linked_from_job_result_dead_letter_review_and_audit_pages(story, auditor):
    v2 = story["v2"]
    url = reverse("admin:pipeline_job_timeline", args=[v2.pk])
    v1_url = reverse("admin:pipeline_job_timeline", args=[story["v1"].pk])
    client = login(auditor)
    for admin_url, target in (
        (reverse("admin:pipeline_job_change", args=[v2.pk]), url),
        (reverse("admin:pipeline_result_change", args=[v2.result.pk]), url),
        (reverse("admin:pipeline_review_change", args=[v2.reviews.get().pk]), url),
        (reverse("admin:pipeline_deadletter_change", args=[story["dead"].pk]), v1_url),
        (reverse("admin:dlq_auditentry_change", args=[story["dead"].reprocess_audit.pk]), v1_url),
        (reverse("admin:pipeline_job_changelist"), url),
        (reverse("admin:pipeline_deadletter_changelist"), v1_url),
    ):
        assert target in client.get(admin_url).content.decode(), admin_url


def test_the_query_count_does_not_grow_with_the_history(story, auditor):
    short = factories.dead_letter("acme", "short-history")
    client = login(auditor)
    counts = []
    for job_id in (short.job_id, story["v2"].pk):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("admin:pipeline_job_timeline", args=[job_id])).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
