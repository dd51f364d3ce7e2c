"""The event a relay hands to publishers."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Protocol


@dataclass(frozen=True)
class Event:
    event_id: uuid.UUID
    tenant: str
    topic: str
    idempotency_key: str
    payload: dict[str, Any]
    created_at: dt.datetime
    # What the publishers asked the relay's claim to read about this event (their ``claim_facts``), by
    # name; empty when nothing was asked or the database could not say (SQLite).
    claim_facts: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


class Publisher(Protocol):
    """Delivers an event somewhere. Delivery is at-least-once: consumers dedupe by event id.

    A publisher may also have ``claim_facts``: name -> a scalar SQL expression over the claimed outbox
    row (written ``{event}.column``) that the relay's claim reads with the row, in the same round trip
    and snapshot, and hands over as ``event.claim_facts[name]`` (so a publisher that would read
    something per batch can skip it when the claim says there is nothing to do).

    And ``wants``: a boolean SQL expression over an event's ``{event}.tenant`` and ``{event}.topic``, false
    only when ``publish`` would do nothing with such an event. Where every publisher after the built-in
    review consumer says it, a commit hands an event none of them wants to the consumer itself, in its
    own transaction, and no relay pass is needed (``pipeline.relay.commit_hand_off``); a publisher
    without it gets every event through the relay."""

    def publish(self, event: Event) -> None: ...


def declared_wants(publisher: object) -> str | None:
    """``publisher``'s ``wants`` (see Publisher), if it says it for the way it publishes: set on the
    instance, or declared by a class at least as derived as the ones whose ``publish`` and
    ``publish_batch`` it runs. A subclass that publishes its own way inherits no promise about what it
    wants, so it gets every event through the relay."""
    wants = getattr(publisher, "wants", None)
    if not isinstance(wants, str) or not wants.strip():
        return None
    if "wants" in getattr(publisher, "__dict__", {}):
        return wants
    mro = type(publisher).__mro__

    def where(name: str) -> int:
        return next((n for n, cls in enumerate(mro) if name in vars(cls)), len(mro))

    return wants if where("wants") <= min(where("publish"), where("publish_batch")) else None


@dataclass
class BatchOutcome:
    """What publishing a batch did: the events whose publication failed (with the error) and those not
    tried because the time ran out (given back untouched). Every other event was published."""

    failed: dict[uuid.UUID, Exception] = field(default_factory=dict)
    untried: set[uuid.UUID] = field(default_factory=set)

    def merge(self, other: "BatchOutcome") -> None:
        for event_id, error in other.failed.items():
            self.failed.setdefault(event_id, error)
        self.untried |= other.untried


class BatchPublisher(Protocol):
    """A publisher that delivers a whole batch at once (the relay prefers it when there): the built-in
    review consumer applies a batch in one statement. ``out_of_time()`` turns true once the relay's claim
    is half spent: events not begun by then go in ``untried``."""

    def publish(self, event: Event) -> None: ...

    def publish_batch(self, events: Sequence[Event], out_of_time: Callable[[], bool]) -> BatchOutcome: ...


def publish_each(publisher: Publisher, events: Sequence[Event], out_of_time: Callable[[], bool]) -> BatchOutcome:
    """A batch through ``publisher``: its ``publish_batch``, or one ``publish`` per event, in order,
    stopping once out of time; also when ``publish_batch`` raises or answers something else, so a
    batch that fails as a whole costs each event its own failure, not the drain. A failed event does
    not stop the others."""
    batch = getattr(publisher, "publish_batch", None)
    if batch is not None:
        try:
            outcome = batch(events, out_of_time)
            if isinstance(outcome, BatchOutcome):
                return outcome
        except Exception:  # the batch failed as a whole: each event on its own, so each fails alone
            pass
    outcome = BatchOutcome()
    for index, event in enumerate(events):
        if out_of_time():
            outcome.untried |= {e.event_id for e in events[index:]}
            break
        try:
            publisher.publish(event)
        except Exception as exc:  # recorded on the event by the relay: backoff, then parking
            outcome.failed[event.event_id] = exc
    return outcome


class PublishError(Exception):
    """A publisher's refusal the relay records on the event: ``status`` is the HTTP status answered, if
    any; ``code`` a short kind (``http_status``, ``timeout``, ``connection``, ``refused_target``, ...).
    Its message is never recorded or logged: it may carry a remote system's words."""

    def __init__(self, code: str, status: int | None = None) -> None:
        super().__init__(code if status is None else f"{code} {status}")
        self.code = code[:32]
        self.status = status


def at_least_one(out_of_time: Callable[[], bool]) -> Callable[[], bool]:
    """``out_of_time`` that never stops the first event: a publisher after a slow one still tries one
    event per pass, so no event is given back untried for ever."""
    asked = False

    def check() -> bool:
        nonlocal asked
        if not asked:
            asked = True
            return False
        return out_of_time()

    return check
