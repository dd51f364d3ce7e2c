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


class PublishError(Exception):
    """A publisher's refusal the relay records on the event: ``status`` is the HTTP status answered, if
    any; ``code`` a short kind (``http_status``, ``timeout``, ``connection``, ``refused_target``, ...).
    Its message is never recorded or logged: it may carry a remote system's words."""

    def __init__(self, code: str, status: int | None = None) -> None:
        super().__init__(code if status is None else f"{code} {status}")
        self.code = code[:32]
        self.status = status
