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
    # A database fault in RelayOps' own bookkeeping (lease, heartbeat, commit, nack): never the job's
    # fault, so the lease is released and the attempt not counted.
    DATABASE_ERROR = "database_error"
    SHUTDOWN = "shutdown"
    UNCLASSIFIED = "unclassified"


class DeadLetterReason(models.TextChoices):
    """Why a job is in the dead-letter queue."""

    PERMANENT_ERROR = "permanent_error"
    MAX_ATTEMPTS_EXCEEDED = "max_attempts_exceeded"
    # Its leases expired (its workers died or stalled) more often than its own budget of expiries.
    LEASE_EXPIRIES_EXCEEDED = "lease_expiries_exceeded"
