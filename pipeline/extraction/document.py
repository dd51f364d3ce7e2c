"""What an extractor is given and what it must be: a callable from a document to its fields.

``checkpoint()`` raises once the job's lease is lost; a long extraction calls it now and then. An
extractor returns the invoice's fields as a dict, or an ``Extraction`` when it also reports what the
attempt spent (a model's tokens); a ``JobFailure`` it raises may carry the same ``Usage``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


@dataclass(frozen=True)
class Document:
    tenant: str
    document_id: str
    payload: Any
    attempt: int
    deadline_at: dt.datetime | None = None  # an extractor never waits past it

    @property
    def text(self) -> str | None:
        """The document's text (``payload["text"]``), or None when the payload has none."""
        text = self.payload.get("text") if isinstance(self.payload, dict) else None
        return text if isinstance(text, str) else None


@dataclass(frozen=True)
class Usage:
    """What one extraction spent. Tokens are None when the extractor used no model."""

    model: str = ""
    prompt_hash: str = ""  # SHA-256 of the prompt template (never the prompt itself)
    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def tokens(self) -> int:
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@dataclass(frozen=True)
class Extraction:
    fields: dict[str, Any]
    usage: Usage = field(default_factory=Usage)


class Extractor(Protocol):
    def __call__(self, document: Document, checkpoint: Callable[[], None]) -> dict[str, Any] | Extraction: ...
