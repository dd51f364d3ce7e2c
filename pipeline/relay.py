"""The outbox relay: claim pending events briefly, publish them, mark them published if still ours."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q

from pipeline import sql
from pipeline.clock import Clock, system_clock
from pipeline.consumer import REVIEW_CONSUMER, ReviewHandoffConsumer
from pipeline.crash import NO_CRASH, CrashInjector
from pipeline.errors import InvalidInputError
from pipeline.events import BatchOutcome, Event, PublishError, Publisher, declared_wants, publish_each
from pipeline.models import MAX_PUBLISH_ATTEMPTS, OutboxEvent
from pipeline.outbox import RESULT_TOPIC, HandOff
from pipeline.reconnect import CONNECTION_ERRORS
from pipeline.runtime import wakeups
from relayops.logging import get_logger
from relayops.validation import check_int, check_number

log = get_logger(__name__)
DEFAULT_CLAIM_SECONDS = 30.0


@dataclass(frozen=True)
class FailurePolicy:
    """What a failed publication costs an event: a backoff of ``backoff_seconds`` doubling per failure
    up to ``backoff_max_seconds``, and parking at the ``max_failures``-th failure."""

    max_failures: int = 10
    backoff_seconds: float = 10.0
    backoff_max_seconds: float = 3600.0

    def __post_init__(self) -> None:
        check_int("max_failures", self.max_failures, low=1, high=1000)
        check_number("backoff_seconds", self.backoff_seconds, above=0, high=86_400)
        check_number("backoff_max_seconds", self.backoff_max_seconds, above=0, high=7 * 86_400)

    @classmethod
    def from_settings(cls) -> "FailurePolicy":
        config = settings.RELAYOPS
        return cls(max_failures=config["OUTBOX_MAX_FAILURES"], backoff_seconds=config["OUTBOX_BACKOFF_SECONDS"],
                   backoff_max_seconds=config["OUTBOX_BACKOFF_MAX_SECONDS"])

    def backoff(self, failures: int) -> dt.timedelta:
        """The wait after the ``failures``-th failure (1, 2, ...)."""
        exponent = min(max(failures - 1, 0), 40)
        return dt.timedelta(seconds=min(self.backoff_seconds * 2 ** exponent, self.backoff_max_seconds))


class ConsumerPublisher:
    """The built-in publisher: delivers to the deduping review-handoff consumer. First in line, the relay
    does its work in its claim (``split_review_handoff``)."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self.consumer = ReviewHandoffConsumer(clock)

    def split_review_handoff(self) -> tuple[bool, Publisher | None]:
        """(whether the review consumer comes first, the publishers after it): here, alone. A subclass
        publishes its own way: the relay hands it the events."""
        return (True, None) if type(self) is ConsumerPublisher else (False, self)

    def publish(self, event: Event) -> None:
        self.consumer.handle(event)

    def publish_batch(self, events: Sequence[Event], out_of_time: Callable[[], bool]) -> BatchOutcome:
        return self.consumer.handle_batch(events)  # one statement: no time to run out of


@dataclass(frozen=True)
class RelayReport:
    claimed: int
    published: int
    failed: int
    lost_claims: int  # published, but the claim had expired and another relay took the row
    parked: int = 0  # failed for the last allowed time: no longer claimed until an operator redelivers
    released: int = 0  # claimed but not tried: half the claim had passed (slow publishers), given back
    read: dict[str, Any] | None = None  # the caller's ``also_read``, read in the claim's statement (PostgreSQL)


def _event(row: dict, facts: dict[str, str]) -> Event:
    raw_id = row["event_id"]
    return Event(
        event_id=raw_id if isinstance(raw_id, uuid.UUID) else uuid.UUID(raw_id), tenant=row["tenant"],
        topic=row["topic"], idempotency_key=row["idempotency_key"], payload=sql.read_json(row["payload"]),
        created_at=sql.read_ts(row["created_at"]), claim_facts={name: row[f"fact_{name}"] for name in facts},
    )


def _facts(publisher: Publisher | None) -> dict[str, str]:
    """What ``publisher`` asks the claim to read about each event (``claim_facts``; PostgreSQL only)."""
    facts = getattr(publisher, "claim_facts", None)
    return dict(facts) if facts and connection.vendor == "postgresql" else {}


def publish_pending(
    batch_size: int = 100,
    *,
    publisher: Publisher | None = None,
    claim_seconds: float = DEFAULT_CLAIM_SECONDS,
    clock: Clock = system_clock,
    crash: CrashInjector = NO_CRASH,
    policy: FailurePolicy | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    also_read: str | None = None,
) -> RelayReport:
    """Publish up to ``batch_size`` pending events. At-least-once: a crash after publishing and
    before marking republishes the event later, and the consumer absorbs it.

    A publisher that raises leaves its event unpublished: the failure is recorded on the row (if the
    claim is still ours) with a backoff, and the event is parked at ``policy.max_failures``. Once half
    the claim has passed, the rows not yet tried are given back, so a batch of slow publications never
    outlives its claim by more than one event's publication (and a drain is not held up for long).

    ``also_read``: a one-row SELECT (literal SQL, its columns named ``also_*``) the claim's statement runs
    in its own snapshot on PostgreSQL, returned as ``RelayReport.read`` (a drain reads when it is next
    due this way, and parks without a statement of its own)."""
    check_int("batch_size", batch_size, low=1, high=10_000)
    policy = policy or FailurePolicy.from_settings()
    check_number("claim_seconds", claim_seconds, above=0, high=3600)
    if publisher is not None and not callable(getattr(publisher, "publish", None)):
        raise InvalidInputError("publisher", "must have a publish(event) method")
    publisher = publisher or ConsumerPublisher(clock)
    token = uuid.uuid4()
    now = clock.now()
    params = {
        "token": sql.uuid_param(token), "now": sql.ts(now),
        "claimed_until": sql.ts(now + dt.timedelta(seconds=claim_seconds)), "limit": batch_size,
        "max_attempts": MAX_PUBLISH_ATTEMPTS,
    }
    also = also_read if also_read and connection.vendor == "postgresql" else None
    handed_off, rest = _split(publisher)
    facts = _facts(rest)
    rows = _claim_and_hand_off(params, facts, also) if handed_off else None
    if rows is None:  # the claim alone: every publisher gets the events
        rest, facts = publisher, _facts(publisher)
        statement = sql.CLAIM_EVENTS_AND_READ if also else sql.CLAIM_EVENTS
        rows = sql.fetch(statement.format(skip_locked=sql.skip_locked(), facts=sql.claim_fact_columns(facts),
                                          also=also), params)
    read = {k: v for k, v in rows[0].items() if k.startswith("also_")} if also and rows else None
    rows = [row for row in rows if row["id"] is not None]  # with a read, a claim of nothing is one empty row
    ordered = sorted(rows, key=lambda r: r["id"])
    events: dict[int, Event] = {}
    unreadable: dict[int, Exception] = {}
    for row in ordered:
        try:
            events[row["id"]] = _event(row, facts)
        except Exception as exc:  # a row no publisher could be handed: it fails alone
            unreadable[row["id"]] = exc
    stop_at = monotonic() + claim_seconds / 2  # slow publishers (webhooks timing out): give the rest back
    outcome = (publish_each(rest, list(events.values()), lambda: monotonic() >= stop_at) if events and rest
               else BatchOutcome())
    published: list[int] = []
    parked = 0
    untried: list[int] = []
    for row in ordered:
        event = events.get(row["id"])
        error = unreadable.get(row["id"]) or (outcome.failed.get(event.event_id) if event else None)
        if error is not None:  # a failed publish stays pending, backs off, and is parked at the last
            parked += _record_failure(row, token, error, policy, clock.now())
            continue
        assert event is not None
        (untried if event.event_id in outcome.untried else published).append(row["id"])
    released = _release(untried, token) if untried else 0
    if published:
        crash("after_publish_before_mark")
    marked = OutboxEvent.objects.filter(pk__in=published, claim_token=token, published_at__isnull=True).update(
        published_at=clock.now(), claim_token=None, claimed_until=None
    ) if published else 0
    return RelayReport(claimed=len(rows), published=marked, failed=len(rows) - len(published) - len(untried),
                       lost_claims=len(published) - marked, parked=parked, released=released, read=read)


def commit_hand_off(publisher: Publisher | None) -> HandOff | None:
    """Whether a commit may hand its event to the review consumer itself (``outbox.HandOff``), given the
    publishers: when the review consumer comes first (the default's ``review-handoff``) and every publisher
    after it declares when it ``wants`` an event, the commit hands off an event none of them wants. None
    when a publisher comes first that is not the consumer, or one after it does not say (it gets every
    event through the relay), or on SQLite (its commit is Python's steps: the relay hands off). A ``wants``
    that does not format as SQL is refused here, once (logged), not at every commit."""
    if connection.vendor != "postgresql":
        return None
    first, rest = _split(publisher or ConsumerPublisher())
    if not first:
        return None
    if rest is None:
        return HandOff(REVIEW_CONSUMER)
    wants = declared_wants(rest)
    if wants is None:
        return None
    when = f"NOT ({wants})"
    try:
        sql.hand_off_argument(when)
    except (KeyError, IndexError, ValueError) as exc:
        log.warning("relay.hand_off_refused", publisher=type(rest).__name__, error_type=type(exc).__name__)
        return None
    return HandOff(REVIEW_CONSUMER, when)


def _split(publisher: Publisher) -> tuple[bool, Publisher | None]:
    """Whether the review consumer comes first among the publishers (its work then joins the relay's
    claim), and the publishers after it; else (False, all of them)."""
    split = getattr(publisher, "split_review_handoff", None)
    return split() if split is not None else (False, publisher)


def _claim_and_hand_off(params: dict, facts: dict[str, str], also: str | None) -> list[dict] | None:
    """Claim and hand the claimed results off to review in one statement (PostgreSQL); None when that
    cannot be done: SQLite, or a claimed event no review can be made from (nothing was claimed then)."""
    if connection.vendor != "postgresql":
        return None
    template = sql.CLAIM_EVENTS_AND_HAND_OFF_AND_READ if also else sql.CLAIM_EVENTS_AND_HAND_OFF
    statement = template.format(skip_locked=sql.skip_locked(), facts=sql.claim_fact_columns(facts), also=also)
    try:
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():  # a savepoint
            rows = sql.fetch(statement, {**params, "consumer": REVIEW_CONSUMER, "review_topic": RESULT_TOPIC})
    except CONNECTION_ERRORS:
        raise  # the database is away: the drain ends and restarts
    except DatabaseError:
        return None
    for row in rows:
        if row["id"] is not None and row["handed_off"]:
            payload = sql.read_json(row["payload"])
            log.info("review.handed_off", tenant=row["tenant"], job_id=payload.get("job_id"),
                     idempotency_key=row["idempotency_key"], outcome="pending")
    return rows


def _release(ids: list[int], token: uuid.UUID) -> int:
    """Give back claimed rows this relay had no time to try, uncounted, so another drain takes them now
    rather than when the claim expires."""
    return OutboxEvent.objects.filter(pk__in=ids, claim_token=token, published_at__isnull=True).update(
        claim_token=None, claimed_until=None, publish_attempts=F("publish_attempts") - 1,
    )


def _record_failure(row: dict, token: uuid.UUID, exc: Exception, policy: FailurePolicy, now: dt.datetime) -> int:
    """Release our claim on a row whose publication failed, with its backoff (or parking); 1 if parked.
    Guarded by the claim token: a relay whose claim expired meanwhile records nothing."""
    failures = row["failures"] + 1
    park = failures >= policy.max_failures
    status = exc.status if isinstance(exc, PublishError) else None
    code = exc.code if isinstance(exc, PublishError) else "publisher_error"
    updated = OutboxEvent.objects.filter(pk=row["id"], claim_token=token, published_at__isnull=True).update(
        failures=failures, last_status=status, last_failure=code, claim_token=None, claimed_until=None,
        next_attempt_at=now + policy.backoff(failures), parked_at=now if park else None,
    )
    log.warning("relay.publish_failed", outbox_id=row["id"], error_type=type(exc).__name__, failure=code,
                status=status, failures=failures, parked=bool(updated and park))
    return 1 if updated and park else 0


def redeliver(event_pk: int, *, clock: Clock = system_clock) -> OutboxEvent | None:
    """Give a parked event back to the relay: its failures and claim count start again, due now.
    Returns the row, or None when it is not parked (published, still retrying, gone, or held by a relay's
    current claim). Run it in the transaction that records who asked
    (``webhooks.services.redeliver_parked`` does)."""
    now = clock.now()
    with transaction.atomic():
        event = (OutboxEvent.objects.parked().select_for_update()
                 .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now), pk=event_pk).first())
        if event is None:
            return None
        OutboxEvent.objects.filter(pk=event.pk).update(
            parked_at=None, failures=0, publish_attempts=0, next_attempt_at=None, claim_token=None,
            claimed_until=None,
        )
        wakeups.ring(wakeups.OUTBOX)
    event.refresh_from_db()
    return event
