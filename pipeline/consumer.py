"""The deduping consumer: applies each ``extraction.completed`` event id once, creating the review handoff.

Other topics (a decision's ``review.decided``) are not for it: it takes them without doing anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from pipeline import sql
from pipeline.clock import Clock, system_clock
from pipeline.events import Event
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
