"""Closed vocabularies for failures: what is stored is always one of these codes, never error text."""

from __future__ import annotations

from django.db import models


class ErrorClass(models.TextChoices):
    TRANSIENT = "transient"  # may pass later: retry with backoff while attempts remain
    PERMANENT = "permanent"  # no retry can help: dead-letter at once
    CANCELLED = "cancelled"  # the work must stop: cancel, never retry


class ErrorCode(models.TextChoices):
    """A classified attempt error."""

    EXTRACTOR_TIMEOUT = "extractor_timeout"
    EXTRACTOR_UNAVAILABLE = "extractor_unavailable"
    DOCUMENT_MALFORMED = "document_malformed"
    SCHEMA_INVALID = "schema_invalid"
    VALIDATION_FAILED = "validation_failed"
    CANCELLED = "cancelled"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    DEADLINE_UNREACHABLE = "deadline_unreachable"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    LEASE_EXPIRED = "lease_expired"
    SHUTDOWN = "shutdown"
    UNCLASSIFIED = "unclassified"


class DeadLetterReason(models.TextChoices):
    """Why a job is in the dead-letter queue."""

    PERMANENT_ERROR = "permanent_error"
    MAX_ATTEMPTS_EXCEEDED = "max_attempts_exceeded"
