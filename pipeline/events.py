"""The event a relay hands to publishers."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Event:
    event_id: uuid.UUID
    tenant: str
    topic: str
    idempotency_key: str
    payload: dict[str, Any]
    created_at: dt.datetime


class Publisher(Protocol):
    """Delivers an event somewhere. Delivery is at-least-once: consumers dedupe by event id."""

    def publish(self, event: Event) -> None: ...
