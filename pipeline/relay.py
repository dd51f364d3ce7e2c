"""The outbox relay: claim pending events briefly, publish them, mark them published if still ours."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

from pipeline import sql
from pipeline.clock import Clock, system_clock
from pipeline.consumer import ReviewHandoffConsumer
from pipeline.crash import NO_CRASH, CrashInjector
from pipeline.errors import InvalidInputError
from pipeline.events import Event, Publisher
from pipeline.models import MAX_PUBLISH_ATTEMPTS, OutboxEvent
from relayops.logging import get_logger
from relayops.validation import check_int, check_number

log = get_logger(__name__)
DEFAULT_CLAIM_SECONDS = 30.0


class ConsumerPublisher:
    """The built-in publisher: delivers to the deduping review-handoff consumer."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self.consumer = ReviewHandoffConsumer(clock)

    def publish(self, event: Event) -> None:
        self.consumer.handle(event)


@dataclass(frozen=True)
class RelayReport:
    claimed: int
    published: int
    failed: int
    lost_claims: int  # published, but the claim had expired and another relay took the row


def _event(row: dict) -> Event:
    raw_id = row["event_id"]
    return Event(
        event_id=raw_id if isinstance(raw_id, uuid.UUID) else uuid.UUID(raw_id), tenant=row["tenant"],
        topic=row["topic"], idempotency_key=row["idempotency_key"], payload=sql.read_json(row["payload"]),
        created_at=sql.read_ts(row["created_at"]),
    )


def publish_pending(
    batch_size: int = 100,
    *,
    publisher: Publisher | None = None,
    claim_seconds: float = DEFAULT_CLAIM_SECONDS,
    clock: Clock = system_clock,
    crash: CrashInjector = NO_CRASH,
) -> RelayReport:
    """Publish up to ``batch_size`` pending events. At-least-once: a crash after publishing and
    before marking republishes the event later, and the consumer absorbs it."""
    check_int("batch_size", batch_size, low=1, high=10_000)
    check_number("claim_seconds", claim_seconds, above=0, high=3600)
    if publisher is not None and not callable(getattr(publisher, "publish", None)):
        raise InvalidInputError("publisher", "must have a publish(event) method")
    publisher = publisher or ConsumerPublisher(clock)
    token = uuid.uuid4()
    now = clock.now()
    rows = sql.fetch(sql.CLAIM_EVENTS.format(skip_locked=sql.skip_locked()), {
        "token": sql.uuid_param(token), "now": sql.ts(now),
        "claimed_until": sql.ts(now + dt.timedelta(seconds=claim_seconds)), "limit": batch_size,
        "max_attempts": MAX_PUBLISH_ATTEMPTS,
    })
    published: list[int] = []
    for row in sorted(rows, key=lambda r: r["id"]):
        try:
            publisher.publish(_event(row))
        except Exception as exc:  # a failed publish stays pending; its claim expires and it is retried
            log.warning("relay.publish_failed", outbox_id=row["id"], error_type=type(exc).__name__)
            continue
        crash("after_publish_before_mark")
        published.append(row["id"])
    marked = OutboxEvent.objects.filter(pk__in=published, claim_token=token, published_at__isnull=True).update(
        published_at=clock.now(), claim_token=None, claimed_until=None
    ) if published else 0
    return RelayReport(claimed=len(rows), published=marked, failed=len(rows) - len(published),
                       lost_claims=len(published) - marked)
