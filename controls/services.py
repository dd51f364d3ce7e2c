"""The live-job actions and tenant controls: what the admin, the API and the ``job_control`` command call.

Each service checks the actor's permission (NotPermittedError) and tenant (NotFoundError: another
tenant's job or tenant answers like a missing one), then makes the change and its audit entry in one
transaction: both land or neither. A job's status and clocks change only through ``pipeline.queue``.

* ``cancel_job``: a queued or leased job ends ``cancelled`` (terminal). A leased job's worker is
  fenced out: its heartbeat, nack or commit is refused and it reports ``lease_lost``; its attempt is
  closed ``cancelled`` with what it had spent.
* ``run_job_now``: a delayed job (a retry waiting out its backoff) becomes claimable now.
* ``pause_intake`` / ``resume_intake``: no worker claims a paused tenant's jobs (queued ones wait,
  expired leases are not taken over); jobs already running finish; enqueueing goes on, so nothing is
  lost. Deadlines keep running while paused: a job whose deadline passed is cancelled
  (``deadline_exceeded``) by the first claim after the resume, as it would be in any other wait.
* ``set_reprocess_limit``: the tenant's reprocess rate limit (None: back to the setting's default).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from controls.actors import Actor, as_actor
from controls.errors import NotApplicableError, NotFoundError, NotPermittedError
from dlq import audit
from dlq.models import AuditAction
from dlq.ratelimit import ReprocessLimit
from pipeline import queue
from pipeline.clock import Clock, system_clock
from pipeline.models import Job
from pipeline.runtime import wakeups
from pipeline.states import JobStatus
from relayops.errors import InvalidInputError
from relayops.formatting import format_duration
from relayops.logging import get_logger
from relayops.validation import check_int
from tenancy.models import TenantControl
from tenancy.names import validate_tenant

log = get_logger(__name__)

MAX_REPROCESS_LIMIT = 100_000


def _name(actor: Actor) -> str:
    """Who acted, as the log says it (never the reason: it is free text, kept in the audit only)."""
    return audit.operator_identity(actor.operator)[0]


def _require(actor: Actor, codename: str, what: str) -> None:
    if not actor.may(codename):
        raise NotPermittedError(f"you may not {what} (permission tenancy.{codename})")


def _reason(reason: object) -> str:
    text = audit.check_reason(reason)
    if not text:
        raise InvalidInputError("reason", "is required: say why, it is kept in the audit with your name")
    return text


def _job(job_id: object, actor: Actor) -> Job:
    """The job, locked, if the actor's tenants hold it; NotFoundError otherwise (missing or foreign alike)."""
    pk = check_int("job_id", job_id, low=1, high=2**63 - 1)
    job = Job.objects.select_for_update().defer("payload").filter(pk=pk).first()
    if job is None or not actor.sees(job.tenant):
        raise NotFoundError(f"no job {pk} in your tenants")
    return job


def _tenant(tenant: object, actor: Actor) -> str:
    name = validate_tenant(tenant)
    if not actor.sees(name):
        raise NotFoundError(f"no tenant {name} in your tenants")
    return name


def _control(tenant: str, clock: Clock) -> TenantControl:
    """The tenant's control row, created with the defaults if it has none, locked until the transaction ends."""
    TenantControl.objects.bulk_create([TenantControl(tenant=tenant, updated_at=clock.now())], ignore_conflicts=True)
    return TenantControl.objects.select_for_update().get(tenant=tenant)


def cancel_job(job_id: int, actor: object, *, reason: str, clock: Clock = system_clock) -> Job:
    """Cancel a queued or leased job (terminal), audited. Returns the job as it now stands."""
    who = as_actor(actor)
    _require(who, "cancel_job", "cancel jobs")
    text = _reason(reason)
    with transaction.atomic():
        job = _job(job_id, who)
        was = queue.cancel(job.pk, clock=clock)
        if was is None:
            raise NotApplicableError(
                f"job {job.pk} is {job.status}: only a queued or leased job can be cancelled; nothing was changed")
        audit.record(AuditAction.CANCEL, at=clock.now(), tenant=job.tenant, operator=who.operator, reason=text,
                     job=job, detail=f"was {was}")
    log.info("control.cancelled", tenant=job.tenant, job_id=job.pk, was=str(was), operator=_name(who))
    job.refresh_from_db(fields=["status", "finished_at", "last_error_code", "lease_until"])
    return job


def run_job_now(job_id: int, actor: object, *, reason: str, clock: Clock = system_clock) -> Job:
    """Make a delayed (retry-waiting) job claimable now, audited. Returns the job as it now stands."""
    who = as_actor(actor)
    _require(who, "run_job_now", "run jobs now")
    text = _reason(reason)
    with transaction.atomic():
        job = _job(job_id, who)
        waited = job.visible_at - clock.now()
        if not queue.run_now(job.pk, clock=clock):
            state = "not queued" if job.status != JobStatus.QUEUED else "not delayed (it is due already)"
            raise NotApplicableError(
                f"job {job.pk} is {state}: only a queued job waiting out a retry's backoff can run now; "
                "nothing was changed")
        audit.record(AuditAction.RUN_NOW, at=clock.now(), tenant=job.tenant, operator=who.operator, reason=text,
                     job=job, detail=f"was due in {format_duration(waited)}")
    log.info("control.run_now", tenant=job.tenant, job_id=job.pk, operator=_name(who))
    job.refresh_from_db(fields=["visible_at"])
    return job


@dataclass(frozen=True)
class Intake:
    tenant: str
    paused: bool
    waiting: int  # the tenant's live jobs when the change landed


def _live(tenant: str) -> int:
    return Job.objects.live().filter(tenant=tenant).count()


def pause_intake(tenant: str, actor: object, *, reason: str, clock: Clock = system_clock) -> Intake:
    """Stop workers claiming ``tenant``'s jobs until ``resume_intake``, audited."""
    who = as_actor(actor)
    _require(who, "pause_intake", "pause a tenant's intake")
    text = _reason(reason)
    with transaction.atomic():
        name = _tenant(tenant, who)
        control = _control(name, clock)
        if control.intake_paused:
            raise NotApplicableError(f"{name}'s intake is paused already; nothing was changed")
        now = clock.now()
        TenantControl.objects.filter(pk=control.pk).update(intake_paused=True, paused_at=now, updated_at=now)
        waiting = _live(name)
        audit.record(AuditAction.PAUSE_INTAKE, at=now, tenant=name, operator=who.operator, reason=text,
                     detail=f"{waiting} live jobs")
    log.warning("control.intake_paused", tenant=name, live_jobs=waiting, operator=_name(who))
    return Intake(name, True, waiting)


def resume_intake(tenant: str, actor: object, *, reason: str, clock: Clock = system_clock) -> Intake:
    """Let workers claim ``tenant``'s jobs again (the drains are woken at commit), audited."""
    who = as_actor(actor)
    _require(who, "pause_intake", "resume a tenant's intake")
    text = _reason(reason)
    with transaction.atomic():
        name = _tenant(tenant, who)
        control = _control(name, clock)
        if not control.intake_paused:
            raise NotApplicableError(f"{name}'s intake is not paused; nothing was changed")
        now = clock.now()
        paused_for = format_duration(now - control.paused_at) if control.paused_at else "?"
        TenantControl.objects.filter(pk=control.pk).update(intake_paused=False, paused_at=None, updated_at=now)
        waiting = _live(name)
        audit.record(AuditAction.RESUME_INTAKE, at=now, tenant=name, operator=who.operator, reason=text,
                     detail=f"paused for {paused_for}; {waiting} live jobs")
        wakeups.ring(wakeups.JOBS)
    log.info("control.intake_resumed", tenant=name, live_jobs=waiting, operator=_name(who))
    return Intake(name, False, waiting)


def set_reprocess_limit(
    tenant: str, limit: int | None, actor: object, *, reason: str, clock: Clock = system_clock
) -> ReprocessLimit:
    """Set ``tenant``'s reprocess limit per window (None: back to the default), audited. Returns the new policy."""
    who = as_actor(actor)
    _require(who, "set_reprocess_limit", "change a tenant's reprocess limit")
    text = _reason(reason)
    new = None if limit is None else check_int("limit", limit, low=1, high=MAX_REPROCESS_LIMIT)
    with transaction.atomic():
        name = _tenant(tenant, who)
        control = _control(name, clock)
        before = ReprocessLimit.for_tenant(name)
        if control.reprocess_limit == new:
            raise NotApplicableError(f"{name}'s reprocess limit is {before.limit} already; nothing was changed")
        now = clock.now()
        TenantControl.objects.filter(pk=control.pk).update(reprocess_limit=new, updated_at=now)
        after = ReprocessLimit.for_tenant(name)
        audit.record(AuditAction.SET_REPROCESS_LIMIT, at=now, tenant=name, operator=who.operator, reason=text,
                     detail=f"{before.limit} -> {after.limit}{'' if new is not None else ' (default)'} "
                            f"per {format_duration(after.window)}")
    log.info("control.reprocess_limit_set", tenant=name, limit=after.limit, operator=_name(who))
    return after


def paused_tenants() -> dict[str, object]:
    """Every paused tenant and since when (the dashboard and ``relayops_status`` show it)."""
    return dict(TenantControl.objects.filter(intake_paused=True).order_by("tenant").values_list("tenant", "paused_at"))
