"""The control services on PostgreSQL: cancel, run-now, pause and resume, the reprocess limit; each
permissioned, tenant-scoped and audited, and a refusal changes nothing."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from controls import services
from controls.actors import Actor
from controls.errors import NotApplicableError, NotFoundError, NotPermittedError
from dlq.models import AuditEntry
from dlq.ratelimit import ReprocessLimit
from pipeline import queue, sql
from pipeline.clock import FrozenClock
from pipeline.errors import PermanentError, TransientError
from pipeline.invariants import check_all
from pipeline.models import Attempt, Job
from pipeline.reasons import ErrorCode
from pipeline.retry import Retry
from relayops.errors import InvalidInputError
from tenancy.models import TenantControl
from tenancy.roles import ensure_roles
from tests.admin.factories import member, snapshot
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


@pytest.fixture
def olivia(db):
    ensure_roles()
    return member("olivia", "acme")


@pytest.fixture
def audrey(db):
    ensure_roles()
    return member("audrey", "acme", auditor=True)


def retrying(clock: FrozenClock, document: str = "flaky") -> Job:
    """A job waiting out a retry's backoff (its first attempt failed transiently)."""
    job, _ = queue.enqueue("acme", document, 1, invoice(1), clock=clock)
    lease = queue.lease_next("w", clock=clock)
    assert lease is not None and lease.job_id == job.pk
    decision = queue.nack(lease, TransientError(ErrorCode.EXTRACTOR_UNAVAILABLE), clock=clock)
    assert isinstance(decision, Retry)
    job.refresh_from_db()
    assert job.status == "queued" and job.visible_at > clock.now()
    return job


def claimable_raw(now: dt.datetime) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(sql.CLAIMABLE, {"now": now})
        return {row[0] for row in cursor.fetchall()}


# -- cancel ----------------------------------------------------------------------------------------

def test_cancel_a_queued_job_ends_it_cancelled_and_audits_who_and_why(olivia, clock):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    done = services.cancel_job(job.pk, olivia, reason="sent twice", clock=clock)
    assert (done.status, done.last_error_code, done.finished_at) == ("cancelled", "cancelled", clock.now())
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.operator, entry.operator_user_id, entry.tenant, entry.job_id, entry.reason,
            entry.detail) == ("cancel", "olivia", olivia.pk, "acme", job.pk, "sent twice", "was queued")
    assert queue.lease_next("w", clock=clock) is None  # never claimed again
    assert check_all().holds


def test_cancel_a_leased_job_closes_its_attempt_and_refuses_its_holder(olivia, clock):
    from pipeline.errors import StaleLeaseError
    from pipeline.outbox import commit_result_with_event

    queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    lease = queue.lease_next("w", clock=clock)
    services.cancel_job(lease.job_id, olivia, reason="stuck on a bad page", clock=clock)
    for late in (lambda: queue.heartbeat(lease, clock=clock), lambda: commit_result_with_event(lease, {}, clock=clock),
                 lambda: queue.nack(lease, PermanentError(ErrorCode.DOCUMENT_MALFORMED), clock=clock),
                 lambda: queue.release(lease, clock=clock)):
        with pytest.raises(StaleLeaseError):
            late()
    (attempt,) = Attempt.objects.all()
    assert (attempt.error_code, attempt.ended_at) == ("cancelled", clock.now())
    assert AuditEntry.objects.get().detail == "was leased"
    assert check_all().holds


def test_cancel_a_finished_job_is_refused_and_changes_nothing(olivia, clock):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    services.cancel_job(job.pk, olivia, reason="first", clock=clock)
    before = snapshot()
    with pytest.raises(NotApplicableError, match="only a queued or leased job"):
        services.cancel_job(job.pk, olivia, reason="again", clock=clock)
    assert snapshot() == before


def test_another_tenants_job_answers_like_a_missing_one_and_changes_nothing(olivia, clock):
    foreign, _ = queue.enqueue("globex", "doc", 1, invoice(1), clock=clock)
    before = snapshot()
    for call in (services.cancel_job, services.run_job_now):
        with pytest.raises(NotFoundError) as refused:
            call(foreign.pk, olivia, reason="not mine", clock=clock)
        with pytest.raises(NotFoundError) as missing:
            call(foreign.pk + 1000, olivia, reason="no such", clock=clock)
        assert str(refused.value).replace(str(foreign.pk), "N") == str(missing.value).replace(str(foreign.pk + 1000), "N")
    with pytest.raises(NotFoundError):
        services.pause_intake("globex", olivia, reason="not mine", clock=clock)
    assert snapshot() == before and not TenantControl.objects.exists()


def test_an_auditor_may_not_act_and_nothing_changes(audrey, clock):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    before = snapshot()
    calls = (lambda: services.cancel_job(job.pk, audrey, reason="x", clock=clock),
             lambda: services.run_job_now(job.pk, audrey, reason="x", clock=clock),
             lambda: services.pause_intake("acme", audrey, reason="x", clock=clock),
             lambda: services.set_reprocess_limit("acme", 50, audrey, reason="x", clock=clock))
    for call in calls:
        with pytest.raises(NotPermittedError):
            call()
    assert snapshot() == before


def test_an_operator_may_not_raise_the_reprocess_limit_without_its_own_permission(olivia, clock):
    with pytest.raises(NotPermittedError, match="tenancy.set_reprocess_limit"):
        services.set_reprocess_limit("acme", 500, olivia, reason="recovery", clock=clock)
    assert ReprocessLimit.for_tenant("acme").limit == 20


@pytest.mark.parametrize("reason", ["", "   ", None, "x" * 501])
def test_a_reason_is_required(olivia, clock, reason):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    with pytest.raises(InvalidInputError):
        services.cancel_job(job.pk, olivia, reason=reason, clock=clock)
    assert Job.objects.get().status == "queued" and not AuditEntry.objects.exists()


@pytest.mark.parametrize("job_id", [0, -1, "1", 2**63, True, None])
def test_a_bad_job_id_is_a_clear_error(olivia, job_id):
    with pytest.raises(InvalidInputError):
        services.cancel_job(job_id, olivia, reason="x")


# -- run now ---------------------------------------------------------------------------------------

def test_run_now_makes_a_retry_waiting_job_claimable_at_once(olivia, clock):
    job = retrying(clock)
    assert queue.lease_next("w2", clock=clock) is None
    services.run_job_now(job.pk, olivia, reason="the extractor is back", clock=clock)
    job.refresh_from_db()
    assert job.visible_at == clock.now()
    lease = queue.lease_next("w2", clock=clock)
    assert (lease.job_id, lease.attempt) == (job.pk, 2)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.job_id) == ("run_now", job.pk) and entry.detail.startswith("was due in ")


def test_run_now_of_a_job_that_is_due_already_is_refused(olivia, clock):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    before = snapshot()
    with pytest.raises(NotApplicableError, match="not delayed"):
        services.run_job_now(job.pk, olivia, reason="hurry", clock=clock)
    assert snapshot() == before


# -- pause and resume ------------------------------------------------------------------------------

def test_a_paused_tenants_jobs_are_not_claimed_and_run_after_the_resume(olivia, clock):
    ours = [queue.enqueue("acme", f"doc-{n}", 1, invoice(n), clock=clock)[0].pk for n in range(3)]
    other, _ = queue.enqueue("globex", "doc", 1, invoice(9), clock=clock)
    intake = services.pause_intake("acme", olivia, reason="bad batch upstream", clock=clock)
    assert (intake.paused, intake.waiting) == (True, 3)
    now = clock.now()
    assert set(Job.objects.claimable(now).values_list("pk", flat=True)) == claimable_raw(now) == {other.pk}
    assert queue.lease_next("w", clock=clock).job_id == other.pk
    assert queue.lease_next("w", clock=clock) is None  # acme's wait
    queue.enqueue("acme", "late-arrival", 1, invoice(7), clock=clock)  # intake goes on: nothing is lost
    assert Job.objects.filter(tenant="acme", status="queued").count() == 4

    services.resume_intake("acme", olivia, reason="upstream fixed", clock=clock)
    taken = {queue.lease_next("w", clock=clock).job_id for _ in range(4)}
    assert set(ours) < taken
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "tenant", "detail"))
    assert actions == [("pause_intake", "acme", "3 live jobs"), ("resume_intake", "acme", "paused for 0 s; 4 live jobs")]


def test_an_expired_lease_of_a_paused_tenant_is_not_taken_over_until_the_resume(olivia, clock):
    queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    lease = queue.lease_next("w", lease_seconds=5, clock=clock)
    services.pause_intake("acme", olivia, reason="x", clock=clock)
    clock.advance(10)
    assert queue.lease_next("w2", clock=clock) is None
    services.resume_intake("acme", olivia, reason="x", clock=clock)
    taken = queue.lease_next("w2", clock=clock)
    assert (taken.job_id, taken.fence) == (lease.job_id, 2)


def test_deadlines_keep_running_while_paused(olivia, clock):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1), deadline=dt.timedelta(minutes=5), clock=clock)
    services.pause_intake("acme", olivia, reason="x", clock=clock)
    clock.advance(600)
    services.resume_intake("acme", olivia, reason="x", clock=clock)
    assert queue.lease_next("w", clock=clock) is None
    job.refresh_from_db()
    assert (job.status, job.last_error_code) == ("cancelled", "deadline_exceeded")


def test_pausing_twice_or_resuming_an_open_intake_is_refused(olivia, clock):
    with pytest.raises(NotApplicableError):
        services.resume_intake("acme", olivia, reason="x", clock=clock)
    services.pause_intake("acme", olivia, reason="x", clock=clock)
    with pytest.raises(NotApplicableError):
        services.pause_intake("acme", olivia, reason="again", clock=clock)
    assert AuditEntry.objects.count() == 1
    assert services.paused_tenants() == {"acme": clock.now()}


# -- the reprocess limit ---------------------------------------------------------------------------

def test_the_limit_is_the_tenants_own_once_set_and_back_to_the_default_when_cleared(clock):
    root = Actor.command("ops")
    assert ReprocessLimit.for_tenant("acme").limit == 20
    services.set_reprocess_limit("acme", 200, root, reason="planned recovery", clock=clock)
    assert (ReprocessLimit.for_tenant("acme").limit, ReprocessLimit.for_tenant("globex").limit) == (200, 20)
    services.set_reprocess_limit("acme", None, root, reason="recovery done", clock=clock)
    assert ReprocessLimit.for_tenant("acme").limit == 20
    details = list(AuditEntry.objects.order_by("id").values_list("action", "operator", "detail"))
    assert details == [("set_reprocess_limit", "manage.py:ops", "20 -> 200 per 1 h"),
                       ("set_reprocess_limit", "manage.py:ops", "200 -> 20 (default) per 1 h")]


@pytest.mark.parametrize("limit", [0, -5, 10**9, "50", 2.5])
def test_a_bad_limit_is_refused(clock, limit):
    with pytest.raises(InvalidInputError):
        services.set_reprocess_limit("acme", limit, Actor.command("ops"), reason="x", clock=clock)
    assert not AuditEntry.objects.exists()


# -- the command -----------------------------------------------------------------------------------

def command(*args: str) -> str:
    out = StringIO()
    call_command("job_control", *args, stdout=out)
    return out.getvalue()


def test_the_command_acts_through_the_same_services(olivia):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(1))
    assert "Paused the intake of acme: 1 live jobs wait." in command("pause", "acme", "--reason", "incident 12")
    assert "Resumed" in command("resume", "acme", "--reason", "over", "--user", "olivia")
    assert "Cancelled job" in command("cancel", str(job.pk), "--reason", "dup", "--user", "olivia")
    assert "200 per 3600 s" in command("set-limit", "acme", "200", "--reason", "recovery")
    operators = list(AuditEntry.objects.order_by("id").values_list("action", "operator"))
    assert operators[0][1].startswith("manage.py:") and operators[1:3] == [("resume_intake", "olivia"),
                                                                           ("cancel", "olivia")]


def test_the_command_as_a_user_is_scoped_and_permissioned_like_the_admin(olivia):
    foreign, _ = queue.enqueue("globex", "doc", 1, invoice(1))
    before = snapshot()
    with pytest.raises(CommandError, match="no job"):
        command("cancel", str(foreign.pk), "--reason", "x", "--user", "olivia")
    with pytest.raises(CommandError, match="set_reprocess_limit"):
        command("set-limit", "acme", "500", "--reason", "x", "--user", "olivia")
    with pytest.raises(CommandError, match="not a job id"):
        command("cancel", "abc", "--reason", "x")
    assert snapshot() == before


def test_relayops_status_says_which_intake_is_paused(olivia, clock):
    from console.status import render, tenants

    queue.enqueue("acme", "doc", 1, invoice(1), clock=clock)
    queue.enqueue("globex", "doc", 1, invoice(2), clock=clock)
    services.pause_intake("acme", olivia, reason="x", clock=clock)
    clock.advance(90)
    rows = {row.tenant: row for row in tenants(clock.now())}
    assert (rows["acme"].paused_seconds, rows["globex"].paused_seconds) == (90.0, None)
    assert rows["acme"].oldest_due_seconds is None  # a paused tenant's jobs are not due
    lines = render(clock.now(), list(rows.values()), []).splitlines()
    assert lines[3].split()[:2] == ["acme", "paused"] and lines[4].split()[:2] == ["globex", "open"]
