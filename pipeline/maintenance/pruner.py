"""Retention: published outbox rows, the consumer's memory of event ids and old metric samples are deleted in
bounded batches.

The consumer must remember an event id at least as long as the outbox may still hold (and so
republish or replay) that event; ``check_retention`` enforces it at startup (pipeline.checks) and
here. A remembered id is also kept while its outbox row is still unpublished, whatever its age.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet

from pipeline.consumer import REVIEW_CONSUMER
from pipeline.models import ConsumedEvent, MetricSample, OutboxEvent
from relayops.errors import InvalidInputError
from relayops.validation import check_int


def check_retention(outbox_days: float, consumer_days: float) -> None:
    """Raise ImproperlyConfigured unless 0 < outbox retention <= consumer dedupe retention."""
    if not outbox_days > 0:
        raise ImproperlyConfigured("RELAYOPS OUTBOX_RETENTION_DAYS must be positive.")
    if consumer_days < outbox_days:
        raise ImproperlyConfigured(
            f"RELAYOPS CONSUMER_DEDUPE_RETENTION_DAYS ({consumer_days:g}) must be at least "
            f"OUTBOX_RETENTION_DAYS ({outbox_days:g}): the consumer would forget events the outbox "
            "can still republish, and a republished one would apply twice."
        )


def _delete_in_batches(rows: QuerySet, batch_size: int, max_batches: int) -> int:
    """Delete ``rows`` oldest id first, ``batch_size`` per statement, at most ``max_batches`` times."""
    deleted = 0
    for _ in range(max_batches):
        ids = list(rows.order_by("pk").values_list("pk", flat=True)[:batch_size])
        if not ids:
            break
        _, per_model = rows.model.objects.filter(pk__in=ids).delete()  # with their cascaded rows
        deleted += per_model.get(rows.model._meta.label, 0)
        if len(ids) < batch_size:
            break
    return deleted


def _check_retention_window(retention: dt.timedelta) -> None:
    if not isinstance(retention, dt.timedelta) or retention <= dt.timedelta(0):
        raise InvalidInputError("retention", "must be a positive timedelta")


@dataclass(frozen=True)
class Batches:
    size: int = 1000
    max_per_run: int = 20

    def __post_init__(self) -> None:
        check_int("size", self.size, low=1, high=100_000)
        check_int("max_per_run", self.max_per_run, low=1, high=10_000)


class OutboxPruner:
    """Deletes outbox rows published more than ``retention`` ago. Unpublished rows are never touched."""

    def __init__(self, retention: dt.timedelta, batches: Batches = Batches()) -> None:
        _check_retention_window(retention)
        self.retention = retention
        self.batches = batches

    def run_once(self, now: dt.datetime) -> int:
        expired = OutboxEvent.objects.filter(published_at__lt=now - self.retention)
        return _delete_in_batches(expired, self.batches.size, self.batches.max_per_run)


class ConsumerMemoryPruner:
    """Forgets event ids consumed more than ``retention`` ago, except those still pending in the outbox."""

    def __init__(self, retention: dt.timedelta, batches: Batches = Batches(), consumer: str = REVIEW_CONSUMER) -> None:
        _check_retention_window(retention)
        self.retention = retention
        self.batches = batches
        self.consumer = consumer

    def run_once(self, now: dt.datetime) -> int:
        pending = OutboxEvent.objects.unpublished().values("event_id")
        forgettable = ConsumedEvent.objects.filter(
            consumer=self.consumer, consumed_at__lt=now - self.retention
        ).exclude(event_id__in=pending)
        return _delete_in_batches(forgettable, self.batches.size, self.batches.max_per_run)


class SamplePruner:
    """Deletes metric samples older than ``retention``, in bounded batches: the sampled tables stay
    bounded (one sweep a minute adds a few rows per tenant and node)."""

    def __init__(self, retention: dt.timedelta, batches: Batches = Batches()) -> None:
        _check_retention_window(retention)
        self.retention = retention
        self.batches = batches

    def run_once(self, now: dt.datetime) -> int:
        expired = MetricSample.objects.filter(sampled_at__lt=now - self.retention)
        return _delete_in_batches(expired, self.batches.size, self.batches.max_per_run)
