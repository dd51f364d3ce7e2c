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
    VALIDATION_FAILED = "validation_failed"  # a business rule failed; the attempt names it (ValidationRule)
    CANCELLED = "cancelled"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    DEADLINE_UNREACHABLE = "deadline_unreachable"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    LEASE_EXPIRED = "lease_expired"
    # A database fault in RelayOps' own bookkeeping (lease, heartbeat, commit, nack): never the job's
    # fault, so the lease is released and the attempt not counted.
    DATABASE_ERROR = "database_error"
    SHUTDOWN = "shutdown"
    BUDGET_EXHAUSTED = "budget_exhausted"  # the document's token or cost ceiling was reached
    # The LLM extractor's failures (pipeline.extraction.llm), transient first.
    LLM_TIMEOUT = "llm_timeout"  # no answer within the request timeout
    LLM_UNAVAILABLE = "llm_unavailable"  # connection refused, reset, DNS: the server is unreachable
    LLM_RATE_LIMITED = "llm_rate_limited"  # 429; its Retry-After sets the earliest next attempt
    LLM_SERVER_ERROR = "llm_server_error"  # 5xx
    LLM_UNAUTHORIZED = "llm_unauthorized"  # 401 / 403: the API key or its rights
    LLM_REQUEST_REJECTED = "llm_request_rejected"  # any other 4xx: model name, request shape, size
    LLM_BAD_RESPONSE = "llm_bad_response"  # a 2xx that is not a chat completion
    LLM_REFUSED = "llm_refused"  # the model declined (a refusal, or the content filter)
    LLM_ANSWER_TRUNCATED = "llm_answer_truncated"  # the answer hit the output token limit
    LLM_ANSWER_NOT_JSON = "llm_answer_not_json"
    LLM_ANSWER_INVALID = "llm_answer_invalid"  # JSON, but not the invoice schema
    UNCLASSIFIED = "unclassified"


class DeadLetterReason(models.TextChoices):
    """Why a job is in the dead-letter queue."""

    PERMANENT_ERROR = "permanent_error"
    MAX_ATTEMPTS_EXCEEDED = "max_attempts_exceeded"
    BUDGET_EXHAUSTED = "budget_exhausted"  # the next attempt would have started past the document's ceiling
    # Its leases expired (its workers died or stalled) more often than its own budget of expiries.
    LEASE_EXPIRIES_EXCEEDED = "lease_expiries_exceeded"


class ValidationRule(models.TextChoices):
    """The business rules an extracted invoice must pass (pipeline.extraction.validation), by code.

    A failed rule is what an operator sees; the values that broke it are document content and are
    never stored apart from the job's payload.
    """

    LINE_AMOUNT = "line_amount", "each line's amount = quantity x unit price, within a cent"
    SUBTOTAL = "subtotal", "subtotal = the sum of the line amounts, within a cent"
    TOTAL = "total", "total = subtotal + tax, within a cent"
    DATES_PARSE = "dates_parse", "issue and due dates are real calendar dates (YYYY-MM-DD)"
    DUE_AFTER_ISSUE = "due_after_issue", "the due date is on or after the issue date"
    CURRENCY_KNOWN = "currency_known", "the currency is an ISO 4217 code"
