"""Plug-ins the tests name in RELAYOPS_EXTRACTOR and RELAYOPS_PUBLISHERS, as a user's own would be."""

from __future__ import annotations

from typing import Any, Callable

from pipeline.events import Event
from pipeline.extraction.document import Document
from pipeline.extraction.rules import invoice_extractor

MARK = "Read by the custom extractor"
NOT_CALLABLE = 42


def custom_extractor(document: Document, checkpoint: Callable[[], None]) -> dict[str, Any]:
    """The rules extractor, with a vendor that says who read it."""
    return {**invoice_extractor(document, checkpoint), "vendor": MARK}


class CountingExtractor:
    """A class: the settings instantiate it with no arguments."""

    def __call__(self, document: Document, checkpoint: Callable[[], None]) -> dict[str, Any]:
        return custom_extractor(document, checkpoint)


class RecordingPublisher:
    """Keeps the event ids it was handed (this process only)."""

    seen: list[str] = []

    def publish(self, event: Event) -> None:
        type(self).seen.append(str(event.event_id))


class NoPublish:
    pass
