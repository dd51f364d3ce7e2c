"""The dashboard is the admin's front page: tenant-scoped, its window kept in the URL, its numbers the
database's, the app list still below it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from controls import services as controls
from controls.actors import Actor
from pipeline.models import DeadLetter, Job, Metric, MetricSample, QueueDepthSample
from pipeline.states import JobStatus
from tests.admin import factories
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db

DATA = reverse("admin:relayops_dashboard_data")


def _populate() -> Job:
    factories.dead_letter("globex", "g-bad")
    factories.succeeded("acme", "a-ok")
    old = factories.queued("acme", "a-waiting", clock=factories.ago(minutes=5))
    factories.queued("globex", "g-waiting")
    now = dt.datetime.now(dt.timezone.utc)
    for minutes, (acme, globex) in enumerate([(3, 1), (2, 1), (1, 1)]):
        at = now - dt.timedelta(minutes=3 - minutes)
        QueueDepthSample.objects.create(sampled_at=at, tenant="acme", queued=acme, leased=0, due=acme, outbox_pending=0)
        QueueDepthSample.objects.create(sampled_at=at, tenant="globex", queued=globex, leased=0, due=globex,
                                        outbox_pending=0)
        MetricSample.objects.create(sampled_at=at, metric=Metric.FINISHED_PER_MINUTE, tenant="acme",
                                    label="succeeded", value=2)
        MetricSample.objects.create(sampled_at=at, metric=Metric.DRAINS_ALIVE, label="n1", value=2)
    return old


def test_the_front_page_is_the_dashboard_with_the_app_list_below(root):
    old = _populate()
    page = login(root).get(reverse("admin:index"))
    assert page.status_code == 200
    html = page.content.decode()
    for key in ("depth", "throughput", "percentiles", "dead_letters", "outbox", "nodes", "refusals"):
        assert f'id="chart-{key}"' in html and f'id="numbers-{key}"' in html
    assert "console/vendor/chartjs/chart.umd.min.js" in html and "console/dashboard.js" in html
    assert "<script>" not in html  # nothing inline: the CSP forbids it
    assert reverse("admin:pipeline_job_changelist") in html  # the app list is still there
    assert f'href="{reverse("admin:pipeline_job_change", args=[old.pk])}"' in html  # the oldest due job


def test_a_superuser_sees_every_tenant_and_the_numbers_are_the_databases(root):
    _populate()
    data = login(root).get(DATA, {"window": "1h"}).json()
    assert data["window"] == "1h" and data["step_seconds"] == 60
    tenants = {row["tenant"]: row for row in data["tenants"]}
    for tenant in ("acme", "globex"):
        live = Job.objects.filter(tenant=tenant)
        assert tenants[tenant]["queued"] == live.filter(status=JobStatus.QUEUED).count()
        assert tenants[tenant]["leased"] == live.filter(status=JobStatus.LEASED).count()
    assert data["totals"]["queued"] == Job.objects.filter(status=JobStatus.QUEUED).count()
    assert {r["reason"]: r["count"] for r in data["dead_letters"]} == {
        DeadLetter.objects.get().reason_code: 1}
    assert [point[1] for point in data["series"]["depth"]["queued"]] == [4, 3, 2]  # one point a minute
    wide = login(root).get(DATA, {"window": "24h"}).json()  # 12 minutes a point: the highest of each
    assert sum(point[1] for point in wide["series"]["depth"]["queued"]) in (4, 4 + 3, 4 + 2, 4 + 3 + 2)
    assert max(point[1] for point in wide["series"]["depth"]["queued"]) == 4
    assert data["series"]["drains_alive"] == {"n1": [[p[0], 2.0] for p in data["series"]["drains_alive"]["n1"]]}
    assert all(p[1] == 2.0 for p in data["series"]["throughput"]["succeeded"])
    oldest = Job.objects.filter(status=JobStatus.QUEUED).order_by("visible_at").first()
    assert data["oldest_due"]["id"] == oldest.pk
    measures = {(r["measure"], r["tenant"]) for r in data["percentiles"]}
    assert ("queue_wait", "acme") in measures and ("inference", "globex") in measures


def test_an_operator_sees_only_their_tenants(acme_operator):
    _populate()
    data = login(acme_operator).get(DATA).json()
    assert [row["tenant"] for row in data["tenants"]] == ["acme"]
    assert data["dead_letters"] == []  # globex's dead letter is not theirs
    assert {r["tenant"] for r in data["percentiles"]} == {"acme"}
    assert [p[1] for p in data["series"]["depth"]["queued"]] == [3, 2, 1]
    assert data["oldest_due"]["tenant"] == "acme"
    assert "globex" not in str(data["tables"])


def test_an_operator_of_no_tenant_sees_nothing_but_the_nodes():
    _populate()
    nobody = factories.member("nemo", "initech")
    data = login(nobody).get(DATA).json()
    assert (data["tenants"], data["dead_letters"], data["percentiles"], data["oldest_due"]) == ([], [], [], None)
    assert "n1" in data["series"]["drains_alive"]


def test_the_window_comes_from_the_url_and_an_unknown_one_is_the_default(root):
    client = login(root)
    assert client.get(DATA, {"window": "7d"}).json()["window"] == "7d"
    assert client.get(DATA, {"window": "forever"}).json()["window"] == "1h"
    page = client.get(reverse("admin:index"), {"window": "24h"}).content.decode()
    assert 'data-window="24h"' in page and 'class="selected" aria-current="true">24h' in page


def test_old_samples_fall_outside_the_window(root):
    now = dt.datetime.now(dt.timezone.utc)
    QueueDepthSample.objects.create(sampled_at=now - dt.timedelta(hours=2), tenant="acme", queued=9, leased=0, due=9,
                                    outbox_pending=0)
    client = login(root)
    assert client.get(DATA, {"window": "1h"}).json()["series"]["depth"]["queued"] == []
    assert [p[1] for p in client.get(DATA, {"window": "24h"}).json()["series"]["depth"]["queued"]] == [9]


def test_signed_out_users_get_the_login_page_not_data(client):
    response = client.get(DATA)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_wide_windows_are_kept_briefly_and_the_current_numbers_never(root, settings):
    from django.core.cache import cache

    cache.clear()
    settings.RELAYOPS = {**settings.RELAYOPS, "DASHBOARD_CACHE_SECONDS": 60.0}
    now = dt.datetime.now(dt.timezone.utc)
    QueueDepthSample.objects.create(sampled_at=now - dt.timedelta(minutes=2), tenant="acme", queued=5, leased=0,
                                    due=5, outbox_pending=0)
    client = login(root)
    first = client.get(DATA, {"window": "24h"}).json()
    QueueDepthSample.objects.create(sampled_at=now - dt.timedelta(minutes=1), tenant="acme", queued=50, leased=0,
                                    due=50, outbox_pending=0)
    factories.queued("acme", "arrived")
    second = client.get(DATA, {"window": "24h"}).json()
    try:
        assert second["series"] == first["series"] and second["series_at"] == first["series_at"]
        assert second["totals"]["queued"] == 1  # the current numbers are read afresh
        assert max(p[1] for p in client.get(DATA, {"window": "1h"}).json()["series"]["depth"]["queued"]) == 50
    finally:
        cache.clear()


def test_a_paused_tenant_is_marked_to_those_who_see_it(root, acme_operator):
    _populate()
    controls.pause_intake("globex", Actor.command("ops"), reason="a bad batch upstream")
    assert login(root).get(DATA, {"window": "1h"}).json()["paused_tenants"] == ["globex"]
    assert login(acme_operator).get(DATA, {"window": "1h"}).json()["paused_tenants"] == []  # not its tenant
    page = login(root).get(reverse("admin:index")).content.decode()
    assert "globex (intake paused)" in page and "acme (intake paused)" not in page
