"""``GET /metrics``: parsed with prometheus-client's own parser, every value checked against SQL; guarded
by a token or an address allow-list; no document id, key or content in a label. ``/healthz`` and
``/readyz``: no sign-in, no detail."""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from console import metrics
from dlq.models import ReprocessRefusal
from pipeline import queue, relay, reviews, sql
from pipeline.clock import system_clock
from pipeline.models import Attempt, DeadLetter, Job, OutboxEvent, Review, ReviewStatus
from pipeline.runtime import liveness
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db

TOKEN = "scrape-token-0123456789"
UNREADABLE = {"text": "not an invoice at all: secret-content-marker"}


@pytest.fixture
def guarded(settings):
    settings.RELAYOPS_METRICS_TOKEN = TOKEN
    settings.RELAYOPS_METRICS_ALLOW = [ipaddress.ip_network("10.1.0.0/16")]
    return settings


def _populate() -> None:
    user = get_user_model().objects.create_user("rita", password="x-long-password-1")
    for n in range(3):
        queue.enqueue("acme", f"ok-{n}", 1, invoice(n))
        process_once("w1")
    queue.enqueue("globex", "secret-doc-id", 1, UNREADABLE)
    process_once("w1")
    relay.publish_pending()
    queue.enqueue("globex", "doc-globex-2", 1, invoice(9))
    review = Review.objects.filter(tenant="acme").order_by("pk").first()
    reviews.decide_review(review.pk, ReviewStatus.APPROVED, user)
    process_once("w1")  # globex's waiting job: committed, its event not yet published
    queue.enqueue("acme", "doc-still-queued", 1, invoice(8))
    ReprocessRefusal.objects.create(at=system_clock.now(), tenant="globex", operator="olivia",
                                    dead_letter=DeadLetter.objects.get(), retry_after_seconds=60)
    liveness.record_presence("node-a:1", system_clock.now(), progress=True)
    liveness.record_presence("node-a:2", system_clock.now(), progress=False)
    liveness.record_presence("node-b:1", system_clock.now() - dt.timedelta(minutes=10), progress=False)


def _scrape(client: Client, **headers: str) -> dict[str, dict[tuple, float]]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_every_value_equals_the_database(guarded):
    _populate()
    got = _scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    for row in sql.fetch("SELECT tenant, status, count(*) AS n FROM pipeline_job GROUP BY tenant, status", {}):
        assert got["relayops_jobs"][(("status", row["status"]), ("tenant", row["tenant"]))] == row["n"]
    finished = sql.fetch("SELECT tenant, status, count(*) AS n FROM pipeline_job WHERE finished_at IS NOT NULL "
                         "GROUP BY tenant, status", {})
    assert got["relayops_jobs_finished_total"] == {
        (("outcome", r["status"]), ("tenant", r["tenant"])): r["n"] for r in finished}
    assert got["relayops_dead_letters_total"] == {
        (("reason", d.reason_code), ("tenant", d.tenant)): 1 for d in DeadLetter.objects.all()}
    assert got["relayops_reprocess_refusals_total"] == {(("tenant", "globex"),): 1}
    assert got["relayops_drains_alive"] == {(("node", "node-a"),): 2, (("node", "node-b"),): 0}

    lag = got["relayops_outbox_lag_seconds"]
    pending = OutboxEvent.objects.unpublished().get()
    assert list(lag) == [(("tenant", pending.tenant),)]
    assert 0 <= lag[(("tenant", pending.tenant),)] < 60

    waits = sql.fetch("SELECT tenant, count(*) AS n, sum(extract(epoch FROM leased_at - due_at)) AS s, "
                      "count(*) FILTER (WHERE extract(epoch FROM leased_at - due_at) <= 0.1) AS fast "
                      "FROM pipeline_attempt WHERE due_at IS NOT NULL GROUP BY tenant", {})
    for row in waits:
        tenant = (("tenant", row["tenant"]),)
        assert got["relayops_queue_wait_seconds_count"][tenant] == row["n"]
        assert got["relayops_queue_wait_seconds_sum"][tenant] == pytest.approx(float(row["s"]))
        assert got["relayops_queue_wait_seconds_bucket"][(("le", "0.1"), ("tenant", row["tenant"]))] == row["fast"]
        assert got["relayops_queue_wait_seconds_bucket"][(("le", "+Inf"), ("tenant", row["tenant"]))] == row["n"]
    for tenant in ("acme", "globex"):
        inference = Attempt.objects.filter(tenant=tenant, inference_seconds__isnull=False)
        assert got["relayops_inference_seconds_count"][(("tenant", tenant),)] == inference.count()
        assert got["relayops_inference_seconds_sum"][(("tenant", tenant),)] == pytest.approx(
            sum(a.inference_seconds for a in inference))
    for tenant, committed in (("acme", 3), ("globex", 1)):
        commits = Attempt.objects.filter(tenant=tenant, commit_seconds__isnull=False)
        assert got["relayops_commit_seconds_count"][(("tenant", tenant),)] == commits.count() == committed
    decided = Review.objects.filter(decided_at__isnull=False).get()
    assert got["relayops_review_wait_seconds_count"] == {(("tenant", "acme"),): 1}
    assert got["relayops_review_wait_seconds_sum"][(("tenant", "acme"),)] == pytest.approx(decided.review_wait_seconds)
    assert got["relayops_end_to_end_seconds_sum"][(("tenant", "acme"),)] == pytest.approx(
        (decided.decided_at - decided.job.created_at).total_seconds())
    waiting = Job.objects.get(document_id="doc-still-queued")
    assert list(got["relayops_oldest_live_job_age_seconds"]) == [(("tenant", "acme"),)]
    assert got["relayops_oldest_live_job_age_seconds"][(("tenant", "acme"),)] == pytest.approx(
        (system_clock.now() - waiting.created_at).total_seconds(), abs=30)


def test_no_label_carries_a_document_id_a_key_or_content(guarded):
    _populate()
    body = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    for job in Job.objects.all():
        assert job.document_id not in body and job.idempotency_key not in body
    assert "secret-content-marker" not in body
    labels = {name for family in text_string_to_metric_families(body) for s in family.samples for name in s.labels}
    assert labels <= {"tenant", "status", "outcome", "reason", "node", "le"}


def test_metrics_need_the_token_or_an_allowed_address(guarded):
    client = Client()
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=TOKEN).status_code == 403  # not a bearer header
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.2.0.1").status_code == 403
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


def test_metrics_answer_403_to_everyone_when_nothing_is_configured(settings):
    settings.RELAYOPS_METRICS_TOKEN = ""
    settings.RELAYOPS_METRICS_ALLOW = []
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403
    assert Client().get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_a_bad_allow_list_stops_start_up():
    from django.core.exceptions import ImproperlyConfigured

    from relayops.security import networks

    assert networks("X", ["10.0.0.0/8", "::1"])[1] == ipaddress.ip_network("::1")
    with pytest.raises(ImproperlyConfigured, match="not an address"):
        networks("RELAYOPS_METRICS_ALLOW", ["10.0.0.300"])


def test_the_exposition_is_the_same_from_any_web_process(guarded):
    """Read from the database: two collectors (two processes' worth) answer the same numbers."""
    _populate()
    frozen = type("Clock", (), {"now": staticmethod(lambda: dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc))})()
    assert metrics.exposition(frozen) == metrics.exposition(frozen)
    body, content_type = metrics.exposition(frozen, accept="application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")


def test_healthz_says_ok_when_the_database_answers():
    response = Client().get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_follows_the_clusters_health_without_detail():
    response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (503, {"status": "unavailable"})  # no drain yet
    liveness.record_presence("node-a:1", system_clock.now(), progress=False)
    response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert "node-a" not in response.content.decode()


def test_health_endpoints_need_no_sign_in_and_are_not_redirected_to_https(settings):
    settings.SECURE_SSL_REDIRECT = True
    assert Client().get("/healthz").status_code == 200
    assert Client().get("/admin/").status_code == 301
