"""One pass of the pipeline for one job: lease -> budget -> extract -> validate -> commit (result + event
+ completion, the attempt closed with its extraction report).

The worker loop that calls it over and over is the drain (pipeline.runtime.drain), with the extractor
``RELAYOPS_EXTRACTOR`` chooses (pipeline.plugins).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import time
from dataclasses import dataclass
from typing import Any, Callable

from pipeline import queue, reconnect
from pipeline.budget import Budget
from pipeline.clock import Clock, system_clock
from pipeline.crash import NO_CRASH, CrashInjector
from pipeline.errors import BudgetExhaustedError, CommitUnsettled, LeaseLostError, StaleLeaseError
from pipeline.extraction.document import Document, Extractor
from pipeline.extraction.metering import Meter
from pipeline.extraction.report import AttemptReport, Prices
from pipeline.extraction.rules import invoice_extractor
from pipeline.extraction.validation import validate_invoice
from pipeline.joblog import job_fields
from pipeline.outbox import CommitOutcome, HandOff, commit_result_with_event, landed
from pipeline.reasons import ErrorCode
from pipeline.reconnect import CONNECTION_ERRORS
from pipeline.retry import DEFAULT_POLICY, Cancel, DeadLetter, RetryPolicy
from pipeline.runtime.heartbeat import Heartbeat
from relayops.logging import get_logger

log = get_logger(__name__)


class Outcome(enum.StrEnum):
    IDLE = "idle"  # nothing was claimable
    COMMITTED = "committed"  # result, event and completion committed
    DEDUPED = "deduped"  # the key already had this result: nothing new was written
    RETRY = "retry"  # failed; queued again after a backoff
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"
    LEASE_LOST = "lease_lost"  # another worker holds the job now: nothing was written


@dataclass(frozen=True)
class WorkOutcome:
    outcome: Outcome
    job_id: int | None = None
    fence: int | None = None
    queue_wait_seconds: float | None = None  # how long the job waited in line for this lease
    more_waiting: bool = True  # the claim saw another claimable job (False: none; idle: nothing either)
    carried: Carried | None = None  # the next job, claimed with this one's commit (``claim_next``)
    handed_off: bool = False  # its event went to review with the commit (``hand_off``): nothing to relay
    read: dict[str, Any] | None = None  # the caller's ``also_read``, read with the commit
    written: tuple[int, ...] | None = None  # the rows each ``also_write`` returned (None: no commit ran them)


@dataclass(frozen=True)
class Carried:
    """A job claimed by the commit of the one before it, waiting for the next unit of work, its lease
    already kept by the process's heartbeat (``beat``, when the work beats)."""

    lease: queue.Lease
    beat: Heartbeat | None = None

    def release(self, code: ErrorCode = ErrorCode.SHUTDOWN) -> None:
        """Give the job back unrun (the worker stops, or its drain failed, before running it): the
        attempt is not counted, its row closed with ``code``."""
        self.forget()
        try:
            queue.release(self.lease, code=code)
        except StaleLeaseError:
            pass  # taken over or ended meanwhile: nothing of ours to give back

    def forget(self) -> None:
        """Stop keeping its lease (its job ran, or will not run here)."""
        if self.beat is not None:
            self.beat.__exit__(None, None, None)


def process_once(
    worker_id: str,
    *,
    extractor: Extractor = invoice_extractor,
    validator: Callable[[dict[str, Any]], dict[str, Any]] = validate_invoice,
    crash: CrashInjector = NO_CRASH,
    clock: Clock = system_clock,
    lease_seconds: float | None = None,
    heartbeat: bool = False,
    policy: RetryPolicy = DEFAULT_POLICY,
    budget: Budget | None = None,
    prices: Prices | None = None,
    announce: bool = True,
    commit_times: list[tuple[int, int, float]] | None = None,
    on_claim: Callable[[queue.Lease | None], None] | None = None,
    carried: Carried | None = None,
    claim_next: Callable[[], bool] | None = None,
    hand_off: HandOff | None = None,
    also_read: str | None = None,
    also_write: Callable[[], tuple[str, ...]] | None = None,
) -> WorkOutcome:
    """Process at most one job. Extraction may run more than once for a job (at-least-once
    execution); the fenced commit makes its effect happen once. An attempt that would start past
    the job's budget (``budget``, default: the settings') is not made: the job is dead-lettered.

    Only the job's own failures go to the retry policy: what the extractor or the validator raised,
    or a result the commit refuses (a conflicting result, one that is not JSON). A connection fault in
    our own bookkeeping never does: one in the claim propagates (nothing was counted; a claim that
    landed unseen expires as a lease expiry, not an attempt), and the commit and the nack reconnect
    and carry on (``pipeline.reconnect``). A commit whose outcome the fault hid is settled by asking
    the database whether this lease's result landed. ``announce=False`` commits without waking the
    relays (the caller publishes the outbox itself next). With ``commit_times`` the commit's time is
    appended there for the caller to record with others (``queue.record_commit_times``) instead of
    written at once. ``on_claim`` is told the claim's answer (the lease, or None) as soon as it comes.

    ``carried``: run this job, claimed with the last one's commit, instead of claiming. ``claim_next``:
    when the job's claim saw another job waiting and ``claim_next()`` says yes as the commit starts (a
    worker asked to stop says no), the commit claims the next job in the same call
    (``WorkOutcome.carried``, for the next unit of work to run or release). ``hand_off``, ``also_read`` and
    what ``also_write()`` returns as the commit starts go to the commit (``outbox.commit_result_with_event``);
    the read only when it claims nothing.
    """
    if carried is not None:
        lease: queue.Lease | None = carried.lease
    else:
        lease = queue.lease_next(worker_id, lease_seconds=lease_seconds, clock=clock)
    if carried is None and on_claim is not None:
        on_claim(lease)
    if lease is None:
        return WorkOutcome(Outcome.IDLE, more_waiting=False)
    try:
        done = _process_lease(lease, extractor=extractor, validator=validator, crash=crash, clock=clock,
                              lease_seconds=lease_seconds, heartbeat=heartbeat, policy=policy, budget=budget,
                              prices=prices, announce=announce, commit_times=commit_times,
                              beat=carried.beat if carried is not None else None,
                              claim_next=claim_next if lease.more_waiting else None, hand_off=hand_off,
                              also_read=also_read, also_write=also_write)
    finally:
        if carried is not None:
            carried.forget()
    return dataclasses.replace(done, more_waiting=lease.more_waiting or done.carried is not None)


def _process_lease(
    lease: queue.Lease, *, extractor: Extractor, validator: Callable[[dict[str, Any]], dict[str, Any]],
    crash: CrashInjector, clock: Clock, lease_seconds: float | None, heartbeat: bool, policy: RetryPolicy,
    budget: Budget | None, prices: Prices | None, announce: bool, commit_times: list[tuple[int, int, float]] | None,
    beat: Heartbeat | None = None, claim_next: Callable[[], bool] | None = None, hand_off: HandOff | None = None,
    also_read: str | None = None, also_write: Callable[[], tuple[str, ...]] | None = None,
) -> WorkOutcome:
    crash("after_lease")
    # A first attempt has spent nothing yet (a released one recorded nothing): only retries are checked.
    if lease.attempt > 1 and (budget or Budget.from_settings()).exhausted(lease.job_id):
        return _fail(lease, BudgetExhaustedError(), clock, policy, None)
    seconds = queue.lease_seconds_or_default(lease_seconds)
    if beat is None and heartbeat:
        beat = Heartbeat(lease, lease_seconds=seconds, clock=clock)
    meter = Meter(extractor, prices or Prices.from_settings())
    try:
        fields = _extract(lease, meter, validator, crash, beat)
        committing = time.monotonic()
        claim = (queue.claim_params(lease.worker_id, lease_seconds=lease_seconds, clock=clock)
                 if claim_next is not None and claim_next() else None)
        writes = _callers_writes(also_write, lease)
        outcome = _commit(lease, fields, clock, meter.report, announce, claim, hand_off, also_read, writes)
        commit_seconds = max(time.monotonic() - committing - outcome.claim_seconds, 0.0)
    except (LeaseLostError, StaleLeaseError):
        log.warning("job.lease_lost", **job_fields(lease, Outcome.LEASE_LOST, inference_seconds=_inference(meter)))
        if meter.report is not None:  # the tokens were spent all the same: they count against the budget
            queue.record_report(lease, meter.report)
        return WorkOutcome(Outcome.LEASE_LOST, lease.job_id, lease.fence)
    except CommitUnsettled as unsettled:  # the database stayed away: the lease will expire, uncounted
        raise unsettled.fault from unsettled
    except Exception as exc:
        return _fail(lease, exc, clock, policy, meter.report)
    crash("after_commit_before_ack")
    done = Outcome.DEDUPED if outcome.deduped else Outcome.COMMITTED
    if commit_times is not None:
        commit_times.append((lease.job_id, lease.fence, commit_seconds))
    else:
        _record_commit_seconds(lease, commit_seconds)
    log.info("job.committed", **job_fields(lease, done, inference_seconds=_inference(meter),
                                            commit_seconds=commit_seconds))
    return WorkOutcome(done, lease.job_id, lease.fence, lease.queue_wait_seconds,
                       carried=_carry(outcome.claimed, seconds, clock, heartbeat), handed_off=outcome.handed_off,
                       read=outcome.read, written=outcome.written)


def _callers_writes(also_write: Callable[[], tuple[str, ...]] | None, lease: queue.Lease) -> tuple[str, ...]:
    """The caller's writes for the commit to carry; none if building them failed: they are the caller's
    bookkeeping (a drain's presence, its commits' times), never the job's fault to fail for."""
    if also_write is None:
        return ()
    try:
        return also_write()
    except Exception as exc:
        log.warning("job.commit_extras_not_built", job_id=lease.job_id, fence=lease.fence,
                    error_type=type(exc).__name__)
        return ()


def _carry(row: dict[str, Any] | None, seconds: float, clock: Clock, heartbeat: bool) -> Carried | None:
    """The job the commit claimed, its lease kept from now on when the work beats (the caller may run
    other work, a relay pass, before it); None when it claimed none, or one past its deadline."""
    lease = queue.take_claimed(row) if row is not None else None
    if lease is None:
        return None
    beat = Heartbeat(lease, lease_seconds=seconds, clock=clock).__enter__() if heartbeat else None
    return Carried(lease, beat)


def _inference(meter: Meter) -> float | None:
    return meter.report.inference_seconds if meter.report is not None else None


def _record_commit_seconds(lease: queue.Lease, seconds: float) -> None:
    """Best effort, after the commit landed: a lost connection loses only this number."""
    try:
        queue.record_commit_seconds(lease, seconds)
    except CONNECTION_ERRORS as exc:
        log.warning("job.commit_time_not_recorded", job_id=lease.job_id, fence=lease.fence,
                    error_type=type(exc).__name__)


def _extract(lease: queue.Lease, meter: Meter, validator: Callable[[dict[str, Any]], dict[str, Any]],
             crash: CrashInjector, beat: Heartbeat | None) -> dict[str, Any]:
    """The job's own work, under its heartbeat: whatever this raises is the job's."""
    with beat or contextlib.nullcontext():
        checkpoint = beat.check if beat else (lambda: None)
        checkpoint()  # a carried job's lease may have been lost while it waited: no work for nothing
        document = Document(lease.tenant, lease.document_id, lease.payload, lease.attempt, lease.deadline_at)
        fields = validator(meter.run(document, checkpoint))
        crash("after_extract")
        checkpoint()
    return fields


def _commit(lease: queue.Lease, fields: dict[str, Any], clock: Clock, report: AttemptReport | None,
            announce: bool, claim: dict[str, Any] | None, hand_off: HandOff | None,
            also_read: str | None, also_write: tuple[str, ...]) -> CommitOutcome:
    try:
        return commit_result_with_event(lease, fields, clock=clock, report=report, announce=announce,
                                        claim_next=claim, hand_off=hand_off, also_read=also_read,
                                        also_write=also_write)
    except CONNECTION_ERRORS as exc:  # it may have landed (the connection died during COMMIT) or not
        log.warning("job.commit_outcome_unknown", job_id=lease.job_id, fence=lease.fence,
                    error_type=type(exc).__name__)
        reconnect.drop_connection()
        try:
            settled = reconnect.retrying(
                lambda: landed(lease) or commit_result_with_event(lease, fields, clock=clock, report=report,
                                                                  announce=announce, hand_off=hand_off),
                what="commit",
            )
        except CONNECTION_ERRORS as fault:
            raise CommitUnsettled(fault) from fault
        if claim is not None:
            _release_unseen_claim(lease)
        return settled


def _release_unseen_claim(lease: queue.Lease) -> None:
    """The next job claimed with a commit whose answer the fault hid, if that landed: given back at once,
    uncounted (best effort: should the database stay away, its lease expires instead)."""
    try:
        released = reconnect.retrying(
            lambda: queue.release_held(lease.worker_id, code=ErrorCode.DATABASE_ERROR, keep=lease.job_id),
            what="release")
    except CONNECTION_ERRORS as exc:
        log.warning("job.claim_not_released", worker=lease.worker_id, error_type=type(exc).__name__)
        return
    if released:
        log.warning("job.claim_released_after_fault", worker=lease.worker_id, jobs=released)


def _fail(
    lease: queue.Lease, exc: Exception, clock: Clock, policy: RetryPolicy, report: AttemptReport | None
) -> WorkOutcome:
    try:
        decision = reconnect.retrying(
            lambda: queue.nack(lease, exc, clock=clock, policy=policy, report=report), what="nack"
        )
    except StaleLeaseError:  # taken over meanwhile, or our own nack landed before its connection died
        log.warning("job.lease_lost", **job_fields(lease, Outcome.LEASE_LOST))
        return WorkOutcome(Outcome.LEASE_LOST, lease.job_id, lease.fence)
    outcome = (Outcome.DEAD_LETTERED if isinstance(decision, DeadLetter)
               else Outcome.CANCELLED if isinstance(decision, Cancel) else Outcome.RETRY)
    log.info("job.failed", **job_fields(
        lease, outcome, inference_seconds=report.inference_seconds if report is not None else None,
        code=decision.code))
    return WorkOutcome(outcome, lease.job_id, lease.fence)
