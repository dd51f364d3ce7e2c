"""The dashboard in Chromium, on a populated database: every chart has drawn data points, the numbers
beside them are the database's, it refreshes by itself keeping the chosen window, and nothing breaks
the Content-Security-Policy (the page fixture fails the test on a violation)."""

from __future__ import annotations

import datetime as dt

import pytest

from console import measures
from console.measures import Measure
from dlq.models import ReprocessRefusal
from pipeline import reviews
from pipeline.clock import system_clock
from pipeline.maintenance.sampler import DepthSampler, MetricSampler
from pipeline.models import DeadLetter, Job, Review, ReviewStatus
from pipeline.runtime import liveness
from pipeline.states import JobStatus
from tests.admin import factories
from tests.browser.conftest import log_in

pytestmark = pytest.mark.browser

CHARTS = ("depth", "throughput", "percentiles", "dead_letters", "outbox", "nodes", "refusals")
POINTS = """key => {
    const chart = Chart.getChart(document.getElementById('chart-' + key));
    if (!chart) return -1;
    return chart.data.datasets.reduce((n, set) => n + set.data.filter(p => p !== null).length, 0);
}"""


def _populate() -> None:
    root = factories.superuser()
    factories.dead_letter("globex", "g-broken")
    factories.succeeded("acme", "a-1")
    factories.succeeded("acme", "a-2", publish=False)  # its event stays unpublished: an outbox lag
    factories.queued("acme", "a-waiting", clock=factories.ago(minutes=3))
    reviews.decide_review(Review.objects.get().pk, ReviewStatus.APPROVED, root)
    ReprocessRefusal.objects.create(at=system_clock.now(), tenant="globex", operator="olivia",
                                    dead_letter=DeadLetter.objects.get(), retry_after_seconds=60)
    now = system_clock.now()
    liveness.record_presence("node-a:1", now, progress=True)
    for minutes in (2, 1, 0):  # three sweeps' worth of samples
        at = now - dt.timedelta(minutes=minutes) + dt.timedelta(seconds=1)
        DepthSampler(dt.timedelta(days=7)).run_once(at)
        MetricSampler().run_once(at)


def _cells(page, key: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"#numbers-{key} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")


def test_every_chart_draws_data_and_the_numbers_are_the_databases(page):
    _populate()
    log_in(page, "root")
    page.wait_for_function("() => document.getElementById('relayops-dashboard').dataset.refreshed")
    for key in CHARTS:
        assert page.evaluate(POINTS, key) > 0, key

    depth = {row[0]: row for row in _cells(page, "depth")}
    for tenant in ("acme", "globex"):
        if not Job.objects.filter(tenant=tenant, status__in=(JobStatus.QUEUED, JobStatus.LEASED)).exists():
            continue
        assert depth[tenant][1] == str(Job.objects.filter(tenant=tenant, status=JobStatus.QUEUED).count())
    assert {row[0]: row[1] for row in _cells(page, "dead_letters")} == {
        DeadLetter.objects.get().reason_code: "1"}
    table = measures.all_percentiles(system_clock.now(), dt.timedelta(hours=1), None)
    shown = {(row[0], row[1]): row for row in _cells(page, "percentiles")}
    for measure in (Measure.QUEUE_WAIT, Measure.INFERENCE, Measure.REVIEW_WAIT):
        for tenant, value in table[measure].items():
            row = shown[(measures.LABELS[measure], tenant)]
            assert row[2] == str(value.count)
            assert row[3] == f"{value.p50:.3f} s" and row[5] == f"{value.p99:.3f} s"
    nodes = {row[0]: row[1] for row in _cells(page, "nodes")}
    assert nodes == {"node-a": "1"}
    oldest = Job.objects.get(document_id="a-waiting")
    assert page.get_attribute("#dash-oldest-due-link", "href") == f"/admin/pipeline/job/{oldest.pk}/change/"
    # the percentile chart's bars are the table's numbers
    bars = page.evaluate("() => Chart.getChart(document.getElementById('chart-percentiles')).data.datasets[0].data")
    assert sorted(bars) == sorted(round(v.p50, 3) for m in (Measure.QUEUE_WAIT, Measure.INFERENCE, Measure.REVIEW_WAIT)
                                  for v in table[m].values())


def test_it_refreshes_by_itself_and_keeps_the_chosen_window(page):
    _populate()
    log_in(page, "root")
    page.click("[data-window-link='24h']")
    page.wait_for_function("() => document.getElementById('relayops-dashboard').dataset.window === '24h'")
    assert page.url.endswith("?window=24h")
    first = page.evaluate("() => Number(document.getElementById('relayops-dashboard').dataset.refreshed)")
    factories.queued("globex", "arrived-later")
    page.wait_for_function(
        f"() => Number(document.getElementById('relayops-dashboard').dataset.refreshed) > {first}", timeout=20_000)
    page.wait_for_function("""() => [...document.querySelectorAll('#numbers-depth tbody tr')]
        .some(r => r.cells[0].textContent === 'globex' && r.cells[1].textContent === '1')""", timeout=20_000)
    assert page.get_attribute("#relayops-dashboard", "data-window") == "24h"
    assert page.get_attribute("[data-window-link='24h']", "aria-current") == "true"
    page.reload()
    page.wait_for_function("() => document.getElementById('relayops-dashboard').dataset.refreshed")
    assert page.get_attribute("#relayops-dashboard", "data-window") == "24h"
