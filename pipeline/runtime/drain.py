"""A drain: the worker loop. It runs jobs and publishes the outbox for a bounded time, parked on
LISTEN/NOTIFY while idle.

A drain knows no job in advance: its unit of work (``process_once`` with its ``extractor`` unless told
otherwise) leases from the job table, and the relay claims from the outbox and hands each event to its
``publisher``, until the budget is spent or a stop is requested. While idle it waits for a wake-up
NOTIFY, the moment the next job becomes claimable or a claim expires, whichever is first, and looks
anyway every ``poll_seconds`` (the safety net; SQLite has no NOTIFY and only polls). It records its
presence every ``PRESENCE_IDLE_SECONDS`` while idle, so a silent worker is a stuck one. A database error
ends the drain (its listener may be dead too); the worker's host starts a fresh one
(pipeline.runtime.host).
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from django.db import DatabaseError, Error, connection
from django.db.models import QuerySet

from pipeline import queue, relay, sql
from pipeline.clock import Clock, system_clock
from pipeline.crash import NO_CRASH, CrashInjector
from pipeline.errors import InvalidInputError, ShutdownInterrupt
from pipeline.events import Publisher
from pipeline.extraction.document import Extractor
from pipeline.extraction.rules import invoice_extractor
from pipeline.models import Job, OutboxEvent
from pipeline.processing import Carried, Outcome, WorkOutcome, process_once
from pipeline.reasons import ErrorCode
from pipeline.reconnect import CONNECTION_ERRORS, drop_connection
from pipeline.runtime import liveness, wakeups
from pipeline.runtime.wake_turn import WakeTurn, nothing_left_for, transaction_ids
from pipeline.runtime.shutdown import STATE, StopState, release_held
from pipeline.states import JobStatus
from relayops.logging import get_logger
from relayops.validation import check_int, check_number

log = get_logger(__name__)

WAIT_SLICE_SECONDS = 0.25  # a parked drain notices a stop request this fast
MIN_WAIT_SECONDS = 0.02  # floor when a due row is held by another claimer: no busy loop
PRESENCE_IDLE_SECONDS = 2.0  # how often an idle drain records its presence (relayops_health reads it)
PRESENCE_BUSY_SECONDS = 1.0
DEFAULT_BATCH_SIZE = 100
DEFAULT_BATCH_WINDOW_SECONDS = 0.05
# A job that waited in line this long means the drains are behind: their commits are then relayed in
# batches. Small, so a cluster falling behind starts batching (and catches up) within milliseconds.
BEHIND_SECONDS = 0.01
# A drain that found no job after the jobs doorbell looks again at the latest this soon.
LOST_RACE_RECHECK_SECONDS = 0.25
OWED_PASSES = 10  # an ending drain publishes its commits in at most this many relay passes
# A drain keeps its commits' times and writes them in one statement once a batch's worth is kept or this
# long has passed, and when it ends (a killed drain loses only these numbers).
COMMIT_TIMES_SECONDS = 5.0
# A drain that parked this long checks its connection before its next statement (Django pings it, and
# renews it when it failed or is past CONN_MAX_AGE); after a shorter park it does not: a ping per wake-up
# was a round trip per job when jobs come one at a time.
CHECK_AFTER_PARK_SECONDS = 1.0

Work = Callable[[str], WorkOutcome]  # one unit of work for a worker id: at most one job


class DrainEnding(enum.StrEnum):
    BUDGET = "budget"  # its time is up; a successor takes over
    STOPPED = "stopped"  # the worker is stopping: no successor
    INTERRUPTED = "interrupted"  # hurried mid-job: its leases were released


@dataclass
class DrainReport:
    jobs: int = 0  # jobs leased and finished (committed, retried, dead-lettered, cancelled or lost)
    published: int = 0
    wakeups: int = 0  # NOTIFYs that woke the drain
    released: int = 0  # leases given back on an interrupted stop
    ended: DrainEnding | None = None


class Drain:
    """Runs jobs and/or the relay for ``max_seconds``; ``run()`` returns what it did."""

    def __init__(
        self,
        worker_id: str,
        *,
        max_seconds: float,
        jobs: bool = True,
        outbox: bool = True,
        poll_seconds: float = 5.0,
        claim_seconds: float = relay.DEFAULT_CLAIM_SECONDS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_window_seconds: float = DEFAULT_BATCH_WINDOW_SECONDS,
        work: Work | None = None,
        extractor: Extractor = invoice_extractor,
        publisher: Publisher | None = None,
        crash: CrashInjector = NO_CRASH,
        stop: StopState = STATE,
        clock: Clock = system_clock,
        monotonic: Callable[[], float] = time.monotonic,
        wake_turn: WakeTurn | None = None,
    ) -> None:
        if not (jobs or outbox):
            raise InvalidInputError("jobs", "a drain runs jobs, the outbox, or both")
        self.max_seconds = check_number("max_seconds", max_seconds, above=0, high=3600)
        self.poll_seconds = check_number("poll_seconds", poll_seconds, above=0, high=60)
        self.worker_id = worker_id
        self.jobs = jobs
        self.outbox = outbox
        self.claim_seconds = claim_seconds
        self.batch_size = check_int("batch_size", batch_size, low=1, high=10_000)
        self.batch_window = check_number("batch_window_seconds", batch_window_seconds, high=60)
        if self.batch_window < 0:
            raise InvalidInputError("batch_window_seconds", "must be 0 (no batching) or more")
        self._relayed_at = monotonic()  # a window starts with the drain
        # When a commit's read last saw nothing a relay pass would take (no event never tried and unclaimed,
        # no claim or backoff ended): as good as a pass for the poll, at no statement of its own.
        self._outbox_clear_at = -math.inf
        self._owed = False  # this drain committed events it has not relayed yet
        self._behind = False  # its last job waited in line BEHIND_SECONDS or more
        self._relay_more = True  # the last relay pass may have left events (it filled its batch, or gave some back)
        # What ended the last park: the doorbells rung, or none (a timeout, or the drain's start); None when
        # the drain has not parked since its last step (it is busy).
        self._woken: set[str] | None = set()
        self._park_deadline: float | None = None
        self._parked_at: float | None = None  # when the last park began; None: not parked since the start
        self._lost_race = False  # the last step was woken by the jobs doorbell and found no job
        # The park ends (unless a doorbell rings) only for the drain's presence record: nothing else is due
        # then, and the step after it records the presence alone and parks on (_beat).
        self._presence_only = False
        self._beat = False
        # The commits' times, kept until COMMIT_TIMES_SECONDS have passed or a batch's worth is kept, then
        # carried by the next commit (PostgreSQL) or written in one statement.
        self.commit_times: list[tuple[int, int, float]] = []
        self._times_recorded_at = monotonic()
        # A drain that relays publishes its own commits at its next step: their doorbell would only wake
        # the other parked drains to race it for the event.
        # The built-in unit of work claims the next job with a commit when its claim saw more waiting (one
        # call and one transaction per job behind a backlog); the job it carries is the next step's.
        self._job_work: Callable[..., WorkOutcome] | None = None
        if work is None:
            work = self._job_work = functools.partial(
                process_once, extractor=extractor, crash=crash, clock=clock, heartbeat=True, announce=not outbox,
                commit_times=self.commit_times if outbox else None, on_claim=self._claimed,
                hand_off=relay.commit_hand_off(publisher))
        self.work: Work = work
        self._carried: Carried | None = None
        self._writing: tuple[bool, int] = (False, 0)  # the running commit carries: (its presence, times kept)
        self._commit_started = -math.inf  # when the last commit of the built-in unit of work began
        self._end = math.inf  # when the budget ends: a drain past it claims nothing with a commit
        # The host's turn to claim for drains the jobs doorbell woke (pipeline.runtime.wake_turn): opened
        # with the listener unless given.
        self._turn = wake_turn
        self._woke_by: frozenset[int] | None = None  # the transactions whose jobs doorbells last woke it
        # Doorbells heard between busy steps (no statement): the outbox's makes the next step relay, the
        # jobs' ends the next park at once (with the transactions that rang it).
        self._heard: set[str] = set()
        self._heard_by: frozenset[int] | None = frozenset()
        self._in_turn = False  # its claim holds the turn
        self._moments_sql: str | None = None  # when it is next due, as one SELECT for the relay's claim
        self._presence_sql: str | None = None  # its presence record, for a commit to make (liveness.presence_write)
        self._read: dict[str, Any] | None = None  # that SELECT's row, read by this step's relay pass
        self.publisher = publisher
        self.crash = crash
        self.stop = stop
        self.clock = clock
        self.monotonic = monotonic
        self._presence_at = -1e9
        self.channels = [c for c, on in ((wakeups.JOBS, jobs), (wakeups.OUTBOX, outbox)) if on]

    def run(self) -> DrainReport:
        report = DrainReport()
        end = self._end = self.monotonic() + self.max_seconds
        listener = None
        own_turn = False
        self.stop.in_drain = True
        try:
            listener = wakeups.Listener.open(self.channels)  # before the first look: no NOTIFY slips by
            if listener is not None and self.jobs and self._turn is None:
                self._turn, own_turn = WakeTurn.for_database(), True
            self._record_presence(progress=False)  # present from its first second, even if a long job follows
            report.ended = self._loop(report, listener, end)
        except ShutdownInterrupt:
            report.ended = DrainEnding.INTERRUPTED
            # Its own connection may be mid-statement: nothing more runs on it. The commits it had not
            # relayed yet (they rang no doorbell) wait for any drain's next timed look.
            report.released = release_held(self.worker_id)
        finally:
            self.stop.in_drain = False
            # A job still carried: already released on an interrupted stop; after a database error (no
            # ending: the drain failed) its release is tried on a fresh connection, else its lease expires.
            if report.ended is None and self._carried is not None:
                drop_connection()  # the failed one may be broken: the release takes a fresh one
                self._drop_carried(release=True, code=ErrorCode.DATABASE_ERROR)
            self._drop_carried(release=False)
            if listener is not None:
                listener.close()
            if own_turn and self._turn is not None:
                self._turn.close()
                self._turn = None
        if report.ended in (DrainEnding.STOPPED, DrainEnding.INTERRUPTED):
            liveness.mark_gone(self.worker_id, self.clock.now())  # the worker stops: no successor
        return report

    def _loop(self, report: DrainReport, listener: wakeups.Listener | None, end: float) -> DrainEnding:
        while not self.stop.requested.is_set():
            if self.monotonic() >= end and self._carried is None:  # a carried job is run first
                self._relay_owed(report)
                return DrainEnding.BUDGET
            if not self._step(report):
                self._park(listener, end, report)
            else:
                self._hear(listener)
        self._drop_carried(release=True, code=ErrorCode.SHUTDOWN)  # back to the line, uncounted
        self._relay_owed(report)
        return DrainEnding.STOPPED

    def _drop_carried(self, *, release: bool, code: ErrorCode = ErrorCode.SHUTDOWN) -> None:
        """Let go of the job carried from the last commit: given back uncounted with ``code``, or (already
        released) only no longer kept by the heartbeat."""
        carried, self._carried = self._carried, None
        if carried is None:
            return
        if not release:
            carried.forget()
            return
        try:
            carried.release(code)
        except Error as exc:  # its lease expires instead
            log.warning("drain.carried_not_released", worker=self.worker_id, job_id=carried.lease.job_id,
                        error_type=type(exc).__name__)
            drop_connection()

    def _step(self, report: DrainReport) -> bool:
        """Run at most one job, then publish what is pending. True if there may be more to do at once.

        Behind a backlog the relay runs at most every ``batch_window`` seconds, so the drain's commits
        are published in batches; keeping up, or once no job is claimable, it runs at once. At the start and
        after a park of CHECK_AFTER_PARK_SECONDS or more the connection is checked first: Django pings it
        once, and renews it if it failed or is due, so a job is not claimed on a connection that died
        while the drain waited. Between busy steps and after a short park it is not pinged (a ping per
        job was one more round trip and commit each): a fault there fails the next statement before
        anything is claimed, and a database error ends the drain (its host starts a fresh one).
        """
        worked = False
        self._read = None  # a read of an earlier step is stale
        try:
            if self._woken is not None and self._check_due():
                connection.close_if_unusable_or_obsolete()
            self._beat = self._woken == set() and self._presence_only
            if self._beat:  # parked until its presence was due, and nothing else: record it and park on
                self._record_presence(progress=False)
                self._woken = None
                return False
            done = self._work() if self.jobs else None
            # The claim said no other job was waiting: the drain parks after this step instead of looking
            # again (a job enqueued since rang the doorbell it hears as it parks).
            more = done is not None and done.more_waiting
            if done is not None and done.outcome != Outcome.IDLE:
                report.jobs += 1
                worked = True
                if done.handed_off:  # its event went to review with its commit: nothing owed to the relay
                    report.published += 1
                else:
                    self._owed = True
                # Behind: the job waited in line (a backlog), so its event can wait for the batch too.
                # Keeping up, each commit is published at once.
                self._behind = (done.queue_wait_seconds or 0.0) >= BEHIND_SECONDS and self.batch_window > 0
            relay_more = False
            if self.outbox and self._relay_due(worked and more):
                relayed = self._relay(report)
                self._relay_more = relay_more = relayed.claimed >= self.batch_size or relayed.released > 0
            elif done is not None:
                self._read = done.read  # when it is next due, read by the commit: the park needs no look
                if self.outbox and done.read is not None and self._outbox_clear(done.read):
                    self._outbox_clear_at = self._commit_started  # its read is of the statement's start
            if self.commit_times and self._times_due(alone=True):
                self._record_commit_times()
            # A busy drain's commits carry its presence once PRESENCE_BUSY_SECONDS have passed; a step that
            # just committed records it alone only if no commit has for as long as an idle drain may wait.
            self._record_presence(progress=worked or relay_more,
                                  idle_pace=worked and self._carries_writes())
            self._lost_race = not worked and self._woken == {wakeups.JOBS}
            self._woken = None
        except DatabaseError as exc:
            log.warning("drain.database_error", worker=self.worker_id, error_type=type(exc).__name__)
            drop_connection()
            raise
        return (worked and more) or relay_more

    def _work(self) -> WorkOutcome | None:
        """The unit of work; woken by the jobs doorbell, in the host's turn: None (no claim) when the
        last claim in turn saw every transaction that rang and no other job waiting. A job carried
        from the last commit is run without a claim."""
        turn = self._turn
        if (self._carried is not None or turn is None or not turn.available or not self._woken
                or wakeups.JOBS not in self._woken):
            return self._unit()
        try:
            if nothing_left_for(turn.take(), self._woke_by):
                return None
            self._in_turn = True
            done = self._unit()
            if self._in_turn:  # a unit of work that did not tell at its claim (_claimed): nothing is known
                turn.give_back(claimed=True)
            return done
        finally:
            self._in_turn = False
            turn.give_back()

    def _unit(self) -> WorkOutcome:
        """One unit of work: the built-in one runs the carried job (or claims) and, unless the drain is
        stopping or past its budget, claims the next job with its commit."""
        if self._job_work is None:
            return self.work(self.worker_id)
        carried, self._carried = self._carried, None
        kept_none = not self.commit_times
        done = self._job_work(self.worker_id, carried=carried, claim_next=self._may_claim_next,
                              also_read=self._also_read(), also_write=self._writes)
        self._carried = done.carried
        (presence, kept), self._writing = self._writing, (False, 0)
        if done.written is not None:  # its commit ran the writes it asked for
            if presence and done.written[0]:  # recorded the presence (with progress)
                self._presence_at = self.monotonic()
            if kept:  # wrote the times it held then (this commit's own came after)
                del self.commit_times[:kept]
                self._times_recorded_at = self.monotonic()
        if kept_none and self.commit_times:  # the first kept since the last write: the times' age starts now
            self._times_recorded_at = self.monotonic()
        return done

    def _writes(self) -> tuple[str, ...]:
        """Asked as a commit starts: what the commit carries of the drain's own writes, those due by then
        (its presence, its earlier commits' times); remembered for when the commit has answered."""
        self._commit_started = self.monotonic()
        presence = self._presence_write() if self._presence_due(progress=True) else None
        kept = len(self.commit_times) if self._times_due() else 0
        times = queue.commit_times_write(self.commit_times[:kept]) if kept else None
        self._writing = (presence is not None, kept if times is not None else 0)
        return tuple(write for write in (presence, times) if write is not None)

    def _carries_writes(self) -> bool:
        """Whether the built-in unit of work's commits carry the drain's presence and commits' times."""
        return self._job_work is not None and self._presence_write() is not None

    def _times_due(self, *, alone: bool = False) -> bool:
        """Whether the kept commits' times are due: for the next commit to carry, or ``alone``, in a statement
        of their own, which a drain whose commits carry them sends only once no commit has for as long again
        (a step that ran no job, a lost race, would otherwise send one as they fall due)."""
        times = 2 if alone and self._carries_writes() else 1
        return (len(self.commit_times) >= self.batch_size * times
                or self.monotonic() - self._times_recorded_at >= COMMIT_TIMES_SECONDS * times)

    def _may_claim_next(self) -> bool:
        """Asked as a commit starts: a drain stopping or past its budget claims nothing with it."""
        return not self.stop.requested.is_set() and self.monotonic() < self._end

    def _claimed(self, lease: queue.Lease | None) -> None:
        """The claim answered: give the turn back at once, with what the claim saw (an idle claim
        returns no snapshot: the next drain claims)."""
        if self._turn is not None and self._in_turn:
            self._in_turn = False
            if lease is None:
                self._turn.give_back(claimed=True)
            else:
                self._turn.give_back(lease.snapshot, lease.more_waiting, claimed=True)

    def _check_due(self) -> bool:
        """Whether the connection is checked before this step: at the start, and after a long park."""
        return self._parked_at is None or self.monotonic() - self._parked_at >= CHECK_AFTER_PARK_SECONDS

    def _relay_due(self, busy: bool) -> bool:
        """Whether this step relays (``busy``: it ran a job and the claim saw more waiting). Its own commits:
        behind a backlog once per batch window, else at once (and at the backlog's last job).
        Anyone's events: when the last pass left some, when the outbox doorbell rang (heard parked or
        between busy steps), once ``poll_seconds`` have passed since its last look at the outbox (a drain
        woken for job after job never parks long enough for the poll: a look is its last relay pass, or its
        last commit's read that saw nothing a pass would take), and on every look that no doorbell caused
        (a due backoff or claim expiry, the poll: events a dead drain left). Woken by the jobs doorbell for a job
        another drain took, it does not look at the outbox sooner than that."""
        if self._owed:
            return not busy or not self._behind or self.monotonic() - self._relayed_at >= self.batch_window
        looked_at = max(self._relayed_at, self._outbox_clear_at)
        if wakeups.OUTBOX in self._heard or self.monotonic() - looked_at >= self.poll_seconds:
            return True  # heard while busy, or a poll interval without a look: events no doorbell announces
        looked = self._woken is not None and (not self._woken or wakeups.OUTBOX in self._woken)
        return self._relay_more or looked

    def _relay(self, report: DrainReport) -> relay.RelayReport:
        relayed = relay.publish_pending(self.batch_size, publisher=self.publisher, crash=self.crash,
                                        claim_seconds=self.claim_seconds, clock=self.clock,
                                        also_read=self._also_read())
        # When it is next due, as the claim saw it: the park after this step needs no look of its own,
        # unless a failure set a backoff since (the claim did not see that).
        self._read = relayed.read if not (relayed.failed or relayed.released) else None
        self._relayed_at, self._owed = self.monotonic(), False
        self._heard.discard(wakeups.OUTBOX)
        report.published += relayed.published
        return relayed

    def _record_commit_times(self) -> None:
        """Best effort, after the commits landed: a lost connection loses only these numbers."""
        times, self.commit_times[:] = list(self.commit_times), []
        self._times_recorded_at = self.monotonic()
        try:
            queue.record_commit_times(times)
        except CONNECTION_ERRORS as exc:
            log.warning("drain.commit_times_not_recorded", worker=self.worker_id, commits=len(times),
                        error_type=type(exc).__name__)
            raise

    def _relay_owed(self, report: DrainReport) -> None:
        """Publish this drain's last commits before it ends (it rang no doorbell for them) and what an
        outbox doorbell it heard between busy steps announced, and record the commits' times it kept."""
        try:
            passes = 0
            while (self.outbox and (self._owed or self._relay_more or wakeups.OUTBOX in self._heard)
                   and passes < OWED_PASSES):
                relayed, passes = self._relay(report), passes + 1
                self._relay_more = relayed.claimed >= self.batch_size
            if self.commit_times:
                self._record_commit_times()
        except DatabaseError as exc:  # the events stay pending: any drain's next look publishes them
            log.warning("drain.database_error", worker=self.worker_id, error_type=type(exc).__name__)
            drop_connection()

    def _hear(self, listener: wakeups.Listener | None) -> None:
        """Between busy steps, take the doorbells rung since (no wait, no statement): a busy drain whose
        commits hand their events off owes the relay nothing, yet other events (a decision's, a webhook
        retry's) are announced only by the outbox doorbell, and a jobs doorbell taken here must still
        end the next park."""
        if listener is None or not (rung := listener.wait(0.0)):
            return
        if wakeups.JOBS in rung:
            by = transaction_ids(listener.payloads.get(wakeups.JOBS))
            self._heard_by = None if by is None or self._heard_by is None else self._heard_by | by
        self._heard |= rung

    def _presence_due(self, *, progress: bool, idle_pace: bool = False) -> bool:
        pace = PRESENCE_BUSY_SECONDS if progress and not idle_pace else PRESENCE_IDLE_SECONDS
        return self.monotonic() - self._presence_at >= pace

    def _record_presence(self, *, progress: bool, idle_pace: bool = False) -> None:
        if self._presence_due(progress=progress, idle_pace=idle_pace):
            now = self.monotonic()
            liveness.record_presence(self.worker_id, self.clock.now(), progress=progress)
            self._presence_at = now

    def _park(self, listener: wakeups.Listener | None, end: float, report: DrainReport) -> None:
        """Wait for a NOTIFY, the next due row, the next presence record or the end of the budget.

        Woken for a job that another drain took, the drain parks again until the deadline it had (what
        was due then is due then still: a doorbell announces work claimable now, and looking again would
        cost a statement for every drain the doorbell woke), but for at most LOST_RACE_RECHECK_SECONDS:
        the job may not have been taken but be a few milliseconds ahead of this host's clock (its
        ``visible_at`` comes from the enqueuing host's). Likewise after a park that ended for its presence
        record alone: it records it and parks on until the deadline it had, without a look.
        """
        if wakeups.JOBS in self._heard:  # rung while it was busy: woken already
            report.wakeups += 1
            self._woken, self._woke_by = set(self._heard), self._heard_by
            self._heard, self._heard_by = set(), frozenset()
            self._presence_only = False
            self._parked_at = self.monotonic()  # it did not idle: its connection needs no check
            return
        resumed = self._lost_race or self._beat  # a re-park continues the park it interrupted
        now = self.monotonic()
        if resumed and self._park_deadline is not None and self._park_deadline > now:
            deadline = self._park_deadline  # when work is next due, as the last look said
            if self._lost_race:
                deadline = min(deadline, now + LOST_RACE_RECHECK_SECONDS)
        else:
            timeout = min(end - now, self.poll_seconds, self._seconds_until_due(self.clock.now()))
            deadline = self._park_deadline = now + max(timeout, MIN_WAIT_SECONDS)
            resumed = False
        presence_at = max(self._presence_at + PRESENCE_IDLE_SECONDS, now + MIN_WAIT_SECONDS)
        # Without a listener (SQLite) the presence record's wake-up is a look as well: its drains only poll.
        presence_only = presence_at < deadline and listener is not None
        deadline = min(deadline, presence_at)
        self._woken = set()  # unless a doorbell rings
        self._presence_only = False  # unless the park times out at the presence record
        if not resumed:
            self._parked_at = now
        while not self.stop.requested.is_set():
            left = deadline - self.monotonic()
            if left <= 0:
                self._presence_only = presence_only
                return
            if listener is None:
                self.stop.requested.wait(min(left, WAIT_SLICE_SECONDS))
            elif rung := listener.wait(min(left, WAIT_SLICE_SECONDS)):
                report.wakeups += 1
                self._woken = rung
                if wakeups.JOBS in rung:
                    self._woke_by = transaction_ids(listener.payloads.get(wakeups.JOBS))
                return

    def _seconds_until_due(self, now: dt.datetime) -> float:
        """Seconds until a job becomes claimable (a retry's backoff, a lease's expiry) or a relay
        claim expires; the poll interval when nothing is scheduled. Read by the relay's claim when this
        step's relay pass read it (and recorded no failure since); else in one statement."""
        read, self._read = self._read, None
        moments = _moments(read) if read is not None else _read_firsts(self._firsts())
        due = [(m - now).total_seconds() for m in moments if m is not None]
        return max(min(due, default=self.poll_seconds), 0.0)

    def _firsts(self) -> list[QuerySet]:
        """The earliest moment of each kind, each a one-value query."""
        firsts: list[QuerySet] = []
        if self.jobs:
            # Each side served by its own index, stopping at its first row; a paused tenant's jobs are
            # not due (they would keep an idle drain spinning), and its resume rings the doorbell.
            waiting = Job.objects.waiting().unpaused()
            firsts.append(_first(waiting.filter(status=JobStatus.QUEUED), "visible_at"))
            firsts.append(_first(waiting.filter(status=JobStatus.LEASED), "lease_until"))
        if self.outbox:
            # A claim's expiry matters only for an event a relay may claim again: one parked by its
            # interrupted claims keeps its expired claim, and would have every parked drain look at once.
            firsts.append(_first(OutboxEvent.objects.claimable(), "claimed_until"))
            # outbox_backoff; a failure releases the claim
            backing_off = OutboxEvent.objects.claimable().filter(claim_token__isnull=True)
            firsts.append(_first(backing_off, "next_attempt_at"))
        return firsts

    def _presence_write(self) -> str | None:
        """The drain's presence record as literal SQL for its commit to run (PostgreSQL), built once."""
        if self._presence_sql is None:
            self._presence_sql = liveness.presence_write(self.worker_id)
        return self._presence_sql

    def _fresh(self) -> QuerySet:
        """An event no relay has tried and none holds (the relay's claim would take it now), as a one-value
        query: ``outbox_fresh`` holds only those never tried, few of them claimed at a time."""
        fresh = OutboxEvent.objects.claimable().filter(next_attempt_at__isnull=True, claimed_until__isnull=True)
        return fresh.order_by("id").values_list("id", flat=True)[:1]

    def _outbox_clear(self, read: dict[str, Any]) -> bool:
        """Whether a commit's read (``_also_read``) saw nothing a relay pass would take: no fresh event, and
        no claim or backoff of the outbox's ended (they come after the jobs' two moments)."""
        if read.get("also_fresh") is not None:
            return False
        now = self.clock.now()
        outbox = _moments(read)[2 if self.jobs else 0:]
        return all(moment is None or moment > now for moment in outbox)

    def _also_read(self) -> str | None:
        """The moments' one-row SELECT, and whether the outbox holds a fresh event (``also_fresh``), as
        literal SQL for a commit or the relay's claim to run (PostgreSQL), built once."""
        if self._moments_sql is None and connection.vendor == "postgresql":
            text, params = _firsts_statement(self._firsts(), prefix="also_")
            if self.outbox:
                fresh, fresh_params = self._fresh().query.sql_with_params()
                text, params = f"{text}, ({fresh}) AS also_fresh", [*params, *fresh_params]
            postgresql_ops: Any = connection.ops  # PostgreSQL's operations compose SQL with its literals
            self._moments_sql = postgresql_ops.compose_sql(text, params).replace("%", "%%")
        return self._moments_sql


def _first(rows: QuerySet, column: str) -> QuerySet:
    """The earliest non-null ``column`` of ``rows``, as a one-value query (MIN through the index)."""
    return rows.filter(**{f"{column}__isnull": False}).order_by(column).values_list(column, flat=True)[:1]


def _firsts_statement(firsts: list[QuerySet], prefix: str = "") -> tuple[str, list[Any]]:
    """The one-value queries as scalar subqueries of one SELECT (columns ``{prefix}0``, ...)."""
    parts: list[str] = []
    params: list[Any] = []
    for n, query in enumerate(firsts):
        text, args = query.query.sql_with_params()
        parts.append(f"({text}) AS {prefix or 'm'}{n}")
        params.extend(args)
    return f"SELECT {', '.join(parts)}", params


def _read_firsts(firsts: list[QuerySet]) -> list[dt.datetime | None]:
    """Run the one-value queries as one statement: a park costs one round trip."""
    text, params = _firsts_statement(firsts)
    with connection.cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    return [None if value is None else sql.read_ts(value) for value in row]


def _moments(read: dict[str, Any]) -> list[dt.datetime | None]:
    """The moments a relay claim or a commit read (``also_0``, ``also_1``, ...; not ``also_fresh``)."""
    numbered = [key for key in read if key.removeprefix("also_").isdigit()]
    values = [read[key] for key in sorted(numbered, key=lambda k: int(k.removeprefix("also_")))]
    return [None if value is None else sql.read_ts(value) for value in values]
