"""Helpers for the integration tier: observe the database, never mock it."""

from __future__ import annotations

from typing import Any

import pytest

from dlq.models import AuditEntry
from pipeline.models import DeadLetter
from pipeline.models import Attempt, ConsumedEvent, Job, OutboxEvent, Result, Review

MODELS = (Job, Attempt, Result, OutboxEvent, Review, ConsumedEvent, DeadLetter, AuditEntry)


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of every RelayOps table, to assert that a refused call changed nothing."""
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in MODELS}


def one_of_each(key: str) -> tuple[int, int, int]:
    return (
        Result.objects.filter(idempotency_key=key).count(),
        OutboxEvent.objects.filter(idempotency_key=key).count(),
        Review.objects.filter(idempotency_key=key).count(),
    )


class CountingExtractor:
    """Wraps the default extractor and counts how often extraction really ran."""

    def __init__(self) -> None:
        from pipeline.extraction.rules import invoice_extractor

        self.inner = invoice_extractor
        self.calls = 0

    def __call__(self, document, checkpoint):
        self.calls += 1
        return self.inner(document, checkpoint)


@pytest.fixture
def counting_extractor() -> CountingExtractor:
    return CountingExtractor()
