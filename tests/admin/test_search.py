"""Search in the lists: an exact key, the start of a document id, or tenant:start, within the user's
tenants, each served by an index (varchar_pattern_ops), never a scan of the table."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.urls import reverse

from tests.admin import factories
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db

JOBS = reverse("admin:pipeline_job_changelist")


@pytest.fixture
def documents():
    for tenant, document_id in (("acme", "INV-1001"), ("acme", "INV-1002"), ("acme", "INV-2001"),
                                ("acme", "RECEIPT-1001"), ("globex", "INV-1003"), ("acme", "INV_1%")):
        factories.queued(tenant, document_id)


def found(client, url: str, term: str) -> list[str]:
    return sorted(f"{row.tenant}:{row.document_id}" for row in client.get(url, {"q": term}).context["cl"].result_list)


def test_a_prefix_of_the_document_id_finds_the_users_documents(documents, acme_operator, root):
    operator = login(acme_operator)
    assert found(operator, JOBS, "INV-10") == ["acme:INV-1001", "acme:INV-1002"]
    assert found(operator, JOBS, "INV-") == ["acme:INV-1001", "acme:INV-1002", "acme:INV-2001"]
    assert found(operator, JOBS, "acme:INV-1") == ["acme:INV-1001", "acme:INV-1002"]
    assert found(operator, JOBS, "globex:INV") == []  # another tenant's, even by name
    assert found(login(root), JOBS, "INV-10") == ["acme:INV-1001", "acme:INV-1002", "globex:INV-1003"]
    assert found(operator, JOBS, "acme:INV-1001:v1") == ["acme:INV-1001"]  # an exact key still works


def test_wildcards_in_a_term_are_plain_characters(documents, acme_operator):
    operator = login(acme_operator)
    assert found(operator, JOBS, "INV_") == ["acme:INV_1%"]
    assert found(operator, JOBS, "%") == []
    assert found(operator, JOBS, "INV_1%") == ["acme:INV_1%"]


def test_dead_letters_and_reviews_search_by_prefix_too(acme_operator):
    dead = factories.dead_letter("acme", "SCAN-77-a")
    review = factories.succeeded("acme", "SCAN-78-b").reviews.get()
    operator = login(acme_operator)
    dead_letters = operator.get(reverse("admin:pipeline_deadletter_changelist"), {"q": "SCAN-7"})
    assert [d.pk for d in dead_letters.context["cl"].result_list] == [dead.pk]
    reviews = operator.get(reverse("admin:pipeline_review_changelist"), {"q": "acme:SCAN-7"})
    assert [r.pk for r in reviews.context["cl"].result_list] == [review.pk]


def plan(sql: str, params: tuple) -> str:
    """The plan PostgreSQL picks with sequential scans priced out: an index appears only if one can serve."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        return json.dumps(cursor.fetchone()[0])


@pytest.mark.parametrize("who, index", [("operator", "job_tenant_document_prefix"), ("root", "job_document_prefix")])
def test_the_prefix_search_is_served_by_its_index(documents, acme_operator, root, who, index):
    client = login(acme_operator if who == "operator" else root)
    queryset = client.get(JOBS, {"q": "INV-10"}).context["cl"].queryset
    sql, params = queryset.query.sql_with_params()
    shown = plan(sql, params)
    assert index in shown and '"Node Type": "Seq Scan"' not in shown, shown
