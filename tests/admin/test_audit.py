"""The audit of reprocesses: read-only for everyone in the admin, newest first, filters; the database refuses changes."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from dlq.models import AuditEntry
from dlq.services import reprocess_from_dlq
from tests.admin import factories
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db
LIST = "admin:dlq_auditentry_changelist"


@pytest.fixture
def entries(acme_operator, globex_operator):
    """Three reprocesses: olivia (acme) two days ago, a script (acme) and gregor (globex) an hour ago."""
    old_clock, new_clock = factories.ago(days=2), factories.ago(hours=1)
    dead = [factories.dead_letter("acme", "doc-a", clock=old_clock), factories.dead_letter("acme", "doc-b"),
            factories.dead_letter("globex", "doc-c")]
    return [
        reprocess_from_dlq(dead[0].pk, acme_operator, reason="scan replaced", clock=old_clock).audit_entry,
        reprocess_from_dlq(dead[1].pk, "nightly-script", reason="bulk", clock=new_clock).audit_entry,
        reprocess_from_dlq(dead[2].pk, globex_operator, reason="fixed", clock=new_clock).audit_entry,
    ]


def listed(user, **params) -> list[int]:
    return [e.pk for e in login(user).get(reverse(LIST), params).context["cl"].result_list]


def test_newest_first_and_filters_by_operator_tenant_and_date(entries, root):
    olivia, script, gregor = entries
    assert listed(root) == [gregor.pk, script.pk, olivia.pk]
    assert listed(root, operator="olivia") == [olivia.pk]
    assert listed(root, tenant="globex") == [gregor.pk]
    since_yesterday = {"at__gte": (olivia.at + dt.timedelta(days=1)).isoformat()}
    assert listed(root, **since_yesterday) == [gregor.pk, script.pk]


def test_the_operator_filter_names_only_operators_of_the_users_tenants(entries, acme_operator):
    response = login(acme_operator).get(reverse(LIST))
    operator_filter = next(f for f in response.context["cl"].filter_specs if f.parameter_name == "operator")
    assert [value for value, _ in operator_filter.lookup_choices] == ["nightly-script", "olivia"]
    assert listed(acme_operator, operator="gregor") == []


def test_an_auditor_sees_who_reprocessed_what_and_why(entries, auditor):
    html = login(auditor).get(reverse("admin:dlq_auditentry_change", args=[entries[0].pk])).content.decode()
    for shown in ("olivia", "scan replaced", "acme:doc-a:v1", "acme:doc-a:v2", "timeline"):
        assert shown in html


def test_the_database_refuses_update_and_delete(entries):
    entry = entries[0]
    for attempt in (
        lambda: AuditEntry.objects.filter(pk=entry.pk).update(reason="nothing happened"),
        lambda: AuditEntry.objects.filter(pk=entry.pk).delete(),
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            attempt()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE dlq_auditentry SET operator = 'someone else'")
    entry.refresh_from_db()
    assert (entry.reason, entry.operator) == ("scan replaced", "olivia")
