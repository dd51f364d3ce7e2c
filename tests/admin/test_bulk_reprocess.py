"""Reprocessing every dead letter a filter matches: the admin's "all N matching", ``manage.py reprocess``
(dry run, progress, the tenant's rate limit), the "not yet reprocessed" filter and the warning for dead
letters that would fail the same way."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.messages import get_messages
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils.html import strip_tags

from controls import services
from controls.actors import Actor
from dlq.models import AuditEntry, ReprocessRefusal
from pipeline import queue
from pipeline.models import DeadLetter, Job
from pipeline.worker import process_once
from tests.admin import factories
from tests.admin.conftest import login
from tests.admin.factories import snapshot
from tests.conftest import invoice

pytestmark = pytest.mark.django_db
LIST = "admin:pipeline_deadletter_changelist"


def dead_letters(tenant: str, count: int, *, prefix: str = "broken", transient: bool = False) -> list[int]:
    """``count`` dead letters of ``tenant``: unreadable documents (permanent_error), or with ``transient``
    a document whose one attempt failed transiently (max_attempts_exceeded)."""
    for n in range(count):
        payload = invoice(n, transient_failures=5) if transient else factories.UNREADABLE
        queue.enqueue(tenant, f"{prefix}-{n}", 1, payload, max_attempts=1)
    while process_once("w-test").outcome != "idle":
        pass
    return list(DeadLetter.objects.filter(tenant=tenant, job__document_id__startswith=prefix)
                .order_by("pk").values_list("pk", flat=True))


def texts(response) -> list[str]:
    return [strip_tags(str(m)) for m in get_messages(response.wsgi_request)]


def across(client, query: str, **extra):
    """The action on "all N matching" of the list filtered by ``query``."""
    data = {"action": "reprocess", "select_across": "1", "_selected_action": ["1"], **extra}
    return client.post(f"{reverse(LIST)}?{query}", data, follow="post" in extra)


def test_all_matching_reprocesses_more_rows_than_a_page_holds(acme_operator, root):
    ours = dead_letters("acme", 130)
    dead_letters("acme", 3, prefix="slow", transient=True)  # another reason: not matched
    dead_letters("globex", 2)  # another tenant: never seen by olivia
    services.set_reprocess_limit("acme", 500, root, reason="planned recovery after the scanner fix")
    client = login(acme_operator)
    page = client.get(f"{reverse(LIST)}?reason_code__exact=permanent_error&reprocessed=no")
    assert len(page.context["cl"].result_list) == 50  # a page is 50; an action on the page at most 100

    asked = across(client, "reason_code__exact=permanent_error&reprocessed=no")
    body = asked.content.decode()
    assert "All <strong>130</strong> matching rows are selected; the first 100 are listed" in body
    assert "<strong>130</strong> of the selected dead letters" in strip_tags(body) or "130" in body
    assert Job.objects.filter(operation_version=2).count() == 0  # nothing happens before the confirmation

    done = across(client, "reason_code__exact=permanent_error&reprocessed=no", post="yes", reason="scanner fixed")
    (message,) = texts(done)
    assert message.startswith("Reprocessed 130 dead letters as new versions:") and message.endswith("and 110 more.")
    assert AuditEntry.objects.filter(action="reprocess", tenant="acme").count() == 130
    assert set(Job.objects.filter(operation_version=2).values_list("tenant", flat=True)) == {"acme"}
    assert set(DeadLetter.objects.filter(reprocess_audit__isnull=False).values_list("pk", flat=True)) == set(ours)
    left = client.get(f"{reverse(LIST)}?reprocessed=no")
    assert {d.reason_code for d in left.context["cl"].result_list} == {"max_attempts_exceeded"}


def test_all_matching_stops_at_the_tenants_limit_and_says_when_to_retry(acme_operator):
    dead_letters("acme", 23)
    client = login(acme_operator)
    done = across(client, "tenant=acme", post="yes", reason="retry them all")
    created, limited = texts(done)
    assert created.startswith("Reprocessed 20 dead letters")
    assert limited.startswith("Tenant acme reached its reprocess limit: 3 dead letters of acme were not reprocessed.")
    assert AuditEntry.objects.filter(action="reprocess").count() == 20
    assert ReprocessRefusal.objects.count() == 1  # one refusal recorded, not one per row left


def test_the_confirmation_warns_how_many_would_fail_the_same_way(acme_operator):
    doomed = dead_letters("acme", 2)  # permanent_error, same payload, extractor rules, unchanged
    hopeful = dead_letters("acme", 3, prefix="slow", transient=True)
    client = login(acme_operator)
    page = client.post(reverse(LIST), {"action": "reprocess", "_selected_action": doomed + hopeful, "index": "0"})
    warning = strip_tags(page.content.decode().split('id="same-failure-warning">')[1].split("</p>")[0])
    assert " ".join(warning.split()).startswith("2 of the selected dead letters failed for a permanent reason")
    page = client.post(reverse(LIST), {"action": "reprocess", "_selected_action": hopeful, "index": "0"})
    assert "same-failure-warning" not in page.content.decode()


def test_the_warning_is_off_once_the_extractor_changed(acme_operator, settings):
    doomed = dead_letters("acme", 2)
    settings.RELAYOPS = {**settings.RELAYOPS, "EXTRACTOR": "tests.integration.plugins.custom_extractor"}
    page = login(acme_operator).post(reverse(LIST), {"action": "reprocess", "_selected_action": doomed, "index": "0"})
    assert "same-failure-warning" not in page.content.decode()


def test_the_not_yet_reprocessed_filter(acme_operator):
    first, second = dead_letters("acme", 2)
    client = login(acme_operator)
    client.post(reverse(LIST), {"action": "reprocess", "_selected_action": [first], "post": "yes", "reason": "x"})
    assert [d.pk for d in client.get(f"{reverse(LIST)}?reprocessed=no").context["cl"].result_list] == [second]
    assert [d.pk for d in client.get(f"{reverse(LIST)}?reprocessed=yes").context["cl"].result_list] == [first]


# -- manage.py reprocess ---------------------------------------------------------------------------

def reprocess(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("reprocess", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_dry_run_prints_what_it_would_do_and_writes_nothing():
    dead_letters("acme", 25)
    dead_letters("acme", 2, prefix="slow", transient=True)
    before = snapshot()
    out, _ = reprocess("--tenant", "acme", "--since", "2000-01-01", "--dry-run")
    assert snapshot() == before
    assert "Dry run: nothing is written. 27 dead letters would be reprocessed." in out
    assert "reason permanent_error: 25" in out and "reason max_attempts_exceeded: 2" in out
    assert "tenant acme: 27; its limit (20 per 1 h) lets 20 through now" in out
    assert "Warning: 25 dead letters failed for a permanent reason" in out


def test_the_command_reprocesses_up_to_the_limit_then_stops_and_says_when_to_retry():
    dead_letters("acme", 24, transient=True)
    with pytest.raises(CommandError, match="20 of 24 reprocessed"):
        reprocess("--tenant", "acme", "--reason", "max_attempts_exceeded", "--reason-text", "extractor back")
    assert AuditEntry.objects.filter(action="reprocess").count() == 20
    assert ReprocessRefusal.objects.count() == 1
    assert set(AuditEntry.objects.values_list("operator", flat=True)) == {f"manage.py:{__import__('getpass').getuser()}"}
    # Raised for a planned recovery (audited), the rest goes through; done ones are skipped.
    services.set_reprocess_limit("acme", 100, Actor.command("lead"), reason="planned recovery")
    out, err = reprocess("--tenant", "acme", "--reason-text", "extractor back")
    assert "reprocessed: 4," in out
    assert AuditEntry.objects.filter(action="reprocess").count() == 24


def test_the_command_filters_by_date_range_and_reason():
    old = dead_letters("acme", 3)
    DeadLetter.objects.filter(pk__in=old[:2]).update(created_at="2026-01-05T10:00:00Z")
    out, _ = reprocess("--since", "2026-01-05", "--until", "2026-01-06", "--dry-run")
    assert "2 dead letters would be reprocessed" in out
    out, _ = reprocess("--reason", "budget_exhausted", "--dry-run")
    assert "0 dead letters would be reprocessed" in out


def test_the_command_as_a_user_sees_only_their_tenants(acme_operator):
    dead_letters("globex", 2)
    out, _ = reprocess("--user", "olivia", "--dry-run")
    assert "0 dead letters would be reprocessed" in out


@pytest.mark.parametrize("args, problem", [
    (("--since", "yesterday"), "not a date"),
    (("--tenant", "Bad Name", "--dry-run"), "tenant_id"),
    (("--since", "2026-02-01", "--until", "2026-01-01", "--dry-run"), "until: must be after since"),
    (("--tenant", "acme"), "--reason-text is required"),
    (("--user", "nobody", "--dry-run"), "no active user"),
])
def test_bad_arguments_are_clear_errors_and_write_nothing(args, problem):
    dead_letters("acme", 1)
    before = snapshot()
    with pytest.raises(CommandError, match=problem):
        reprocess(*args)
    assert snapshot() == before


def test_the_progress_callback_hears_every_row_including_those_left_at_the_limit():
    from dlq.bulk import reprocess_matching

    dead_letters("acme", 23)
    heard = []
    report = reprocess_matching(DeadLetter.objects.all(), "script", reason="x", on_row=heard.append, chunk=7)
    assert len(heard) == 23 and heard.count(None) == 2  # 20 done, 1 refused, 2 not tried
    assert (report.reprocessed, report.not_tried["acme"]) == (20, 2)
    assert 3590 <= report.retry_after_seconds["acme"] <= 3600


def test_a_tenants_own_lower_limit_refuses_past_it_and_leaves_other_tenants_alone():
    from dlq.services import RowResult, reprocess_many

    ours, theirs = dead_letters("acme", 5), dead_letters("globex", 5)
    services.set_reprocess_limit("acme", 3, Actor.command("lead"), reason="be careful with acme")
    outcomes = reprocess_many(ours + theirs, "script", reason="retry")
    assert [o.result for o in outcomes] == [RowResult.REPROCESSED] * 3 + [RowResult.RATE_LIMITED] * 2 + [
        RowResult.REPROCESSED] * 5
    assert ReprocessRefusal.objects.filter(tenant="acme").count() == 2
