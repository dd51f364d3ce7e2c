"""Runs an extractor and measures it: the extraction report of one attempt (who ran, what it spent,
how long the inference took), whether it returned fields or raised."""

from __future__ import annotations

import time
from typing import Any, Callable

from pipeline.errors import JobFailure
from pipeline.extraction.document import Document, Extraction, Extractor, Usage
from pipeline.extraction.report import AttemptReport, Prices


def extractor_name(extractor: object) -> str:
    """The name an attempt records: the extractor's ``extractor_name`` ("rules", "llm"), else its
    dotted path (a function's, or an instance's class)."""
    named = getattr(extractor, "extractor_name", None)
    if isinstance(named, str) and named:
        return named
    target = extractor if callable(extractor) and hasattr(extractor, "__qualname__") else type(extractor)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


class Meter:
    """``run`` calls the extractor and leaves ``report`` set, on success and on failure."""

    def __init__(self, extractor: Extractor, prices: Prices, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.extractor = extractor
        self.name = extractor_name(extractor)
        self.prices = prices
        self.monotonic = monotonic
        self.report: AttemptReport | None = None

    def run(self, document: Document, checkpoint: Callable[[], None]) -> Any:
        """The fields the extractor returned (validation decides whether they are an invoice)."""
        started = self.monotonic()
        try:
            result = self.extractor(document, checkpoint)
        except JobFailure as failure:
            self._record(failure.usage or Usage(), started)
            raise
        except Exception:
            self._record(Usage(), started)
            raise
        extraction = result if isinstance(result, Extraction) else Extraction(result)
        self._record(extraction.usage, started)
        return extraction.fields

    def _record(self, usage: Usage, started: float) -> None:
        self.report = AttemptReport(
            extractor=self.name, usage=usage, inference_seconds=max(self.monotonic() - started, 0.0),
            cost=self.prices.cost(usage),
        )
