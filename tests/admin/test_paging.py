"""The admin's paginator: exact counts while cheap, PostgreSQL's estimates past the limit, never a full COUNT(*)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from pipeline.admin import JobAdmin
from pipeline.models import Job
from relayops.paging import EstimatedCountPaginator
from tests.admin import factories
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db


class SmallLimit(EstimatedCountPaginator):
    exact_limit = 3


@pytest.fixture
def jobs():
    for n in range(5):
        factories.queued("acme", f"doc-{n}")
    factories.queued("globex", "doc-0")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pipeline_job")  # what autovacuum does for a real table


def count(paginator: EstimatedCountPaginator) -> tuple[int, bool, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        total = paginator.count
    return total, paginator.estimated, [q["sql"] for q in captured]


def test_a_small_table_is_counted_exactly(jobs):
    total, estimated, sql = count(EstimatedCountPaginator(Job.objects.order_by("pk"), 10))
    assert (total, estimated) == (6, False)


def test_a_big_unfiltered_table_is_counted_from_the_statistics(jobs):
    total, estimated, sql = count(SmallLimit(Job.objects.order_by("pk"), 10))
    assert (total, estimated) == (6, True)  # reltuples after ANALYZE
    assert len(sql) == 1 and "pg_class" in sql[0] and "COUNT(" not in sql[0].upper()


def test_a_table_the_statistics_call_small_is_counted_exactly(jobs):
    class Limit10(EstimatedCountPaginator):
        exact_limit = 10

    total, estimated, sql = count(Limit10(Job.objects.order_by("pk"), 10))
    assert (total, estimated) == (6, False)
    assert "pg_class" in sql[0] and "COUNT(" in sql[1].upper()


def test_a_filtered_list_counts_at_most_the_limit_then_asks_the_planner(jobs):
    total, estimated, sql = count(SmallLimit(Job.objects.filter(tenant="acme").order_by("pk"), 10))
    assert estimated and total >= 4
    assert "LIMIT 4" in sql[0] and sql[1].startswith("EXPLAIN")
    small, estimated, _ = count(SmallLimit(Job.objects.filter(tenant="globex").order_by("pk"), 10))
    assert (small, estimated) == (1, False)


def test_the_jobs_page_says_about_when_it_estimates(jobs, root, monkeypatch):
    monkeypatch.setattr(JobAdmin, "paginator", SmallLimit)
    html = login(root).get(reverse("admin:pipeline_job_changelist")).content.decode()
    assert "about 6 jobs" in html
    exact = login(root).get(reverse("admin:pipeline_job_changelist"), {"tenant": "globex"}).content.decode()
    assert "1 job" in exact and "about 1 job" not in exact
