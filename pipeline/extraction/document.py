"""What an extractor is given and what it must be: a callable from a document to its fields.

``checkpoint()`` raises once the job's lease is lost; a long extraction calls it now and then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol


@dataclass(frozen=True)
class Document:
    tenant: str
    document_id: str
    payload: Any
    attempt: int


class Extractor(Protocol):
    def __call__(self, document: Document, checkpoint: Callable[[], None]) -> dict[str, Any]: ...
