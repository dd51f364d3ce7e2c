"""The deduping consumer: applies each ``extraction.completed`` event id once, creating the review handoff.

Other topics (a decision's ``review.decided``) are not for it: it takes them without doing anything.
A batch is applied in one statement (``sql.CONSUME_REVIEWS``); if the batch is refused as a whole (an
event whose review cannot be written), each event is applied on its own, so one bad event fails alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import DatabaseError, connection, transaction

from pipeline import sql
from pipeline.clock import Clock, system_clock
from pipeline.events import BatchOutcome, Event
from pipeline.reconnect import CONNECTION_ERRORS
from pipeline.models import Review
from pipeline.outbox import RESULT_TOPIC
from relayops.logging import get_logger

log = get_logger(__name__)

REVIEW_CONSUMER = "review-handoff"


@dataclass(frozen=True)
class ConsumeOutcome:
    applied: bool
    reason: str  # "applied", "duplicate_event" or "other_topic"


class ReviewHandoffConsumer:
    """Records the event id and creates the Review in one transaction, so a republished event is a no-op."""

    name = REVIEW_CONSUMER

    def __init__(self, clock: Clock = system_clock) -> None:
        self.clock = clock

    def handle(self, event: Event) -> ConsumeOutcome:
        if event.topic != RESULT_TOPIC:
            return ConsumeOutcome(applied=False, reason="other_topic")
        now = self.clock.now()
        with transaction.atomic():
            fresh = sql.fetch(sql.INSERT_CONSUMED, {
                "consumer": self.name, "event_id": sql.uuid_param(event.event_id), "now": sql.ts(now),
            })
            if not fresh:
                return ConsumeOutcome(applied=False, reason="duplicate_event")
            Review.objects.create(
                tenant=event.tenant, document_id=event.payload["document_id"],
                idempotency_key=event.idempotency_key, event_id=event.event_id,
                job_id=event.payload["job_id"], created_at=now,
            )
        log.info("review.handed_off", tenant=event.tenant, job_id=event.payload["job_id"],
                 idempotency_key=event.idempotency_key, outcome="pending")
        return ConsumeOutcome(applied=True, reason="applied")

    def handle_batch(self, events: Sequence[Event]) -> BatchOutcome:
        """Apply ``events`` at once: one statement on PostgreSQL, whatever the batch's size."""
        mine = [e for e in events if e.topic == RESULT_TOPIC]
        if not mine:
            return BatchOutcome()
        if connection.vendor != "postgresql":
            return self._one_by_one(mine)
        try:
            params = {
                "consumer": self.name, "now": self.clock.now(), "event_ids": [e.event_id for e in mine],
                "tenants": [e.tenant for e in mine], "documents": [e.payload["document_id"] for e in mine],
                "keys": [e.idempotency_key for e in mine], "jobs": [e.payload["job_id"] for e in mine],
            }
        except (KeyError, TypeError):  # a malformed event: it fails alone
            return self._one_by_one(mine)
        try:
            with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():  # a savepoint
                created = sql.fetch(sql.CONSUME_REVIEWS, params)
        except CONNECTION_ERRORS:
            raise  # the database is away: nothing is known of any event; the drain ends and restarts
        except DatabaseError:
            return self._one_by_one(mine)  # find the event that cannot be applied; the others are
        for row in created:
            log.info("review.handed_off", tenant=row["tenant"], job_id=row["job_id"],
                     idempotency_key=row["idempotency_key"], outcome="pending")
        return BatchOutcome()

    def _one_by_one(self, events: Sequence[Event]) -> BatchOutcome:
        outcome = BatchOutcome()
        for event in events:
            try:
                self.handle(event)
            except CONNECTION_ERRORS:
                raise
            except Exception as exc:
                outcome.failed[event.event_id] = exc
        return outcome

