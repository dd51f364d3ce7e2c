"""The pipeline's exceptions, rooted in relayops.errors. Each class's docstring is its default message."""

from __future__ import annotations

import datetime as dt

from pipeline.extraction.document import Usage
from pipeline.reasons import ErrorClass, ErrorCode, ValidationRule
from relayops.errors import InvalidInputError, RelayOpsError

__all__ = [
    "RelayOpsError", "InvalidInputError", "IdempotencyConflictError", "StaleLeaseError", "LeaseLostError",
    "NotReprocessableError", "ReprocessRateLimitedError", "JobFailure", "TransientError", "PermanentError",
    "ValidationFailed", "BudgetExhaustedError", "JobCancelledError", "CrashSimulated", "ShutdownInterrupt",
    "CommitUnsettled",
]


class IdempotencyConflictError(RelayOpsError):
    """The idempotency key already exists with a different payload."""

    def __init__(self, key: str, where: str = "job") -> None:
        self.key = key
        super().__init__(f"{key} already has a {where} with a different payload")


class StaleLeaseError(RelayOpsError):
    """The lease is no longer current: the job was re-leased or finished."""

    def __init__(self, job_id: int, fence: int) -> None:
        self.job_id = job_id
        self.fence = fence
        super().__init__(f"job {job_id}: fence {fence} is not the current lease")


class LeaseLostError(RelayOpsError):
    """The lease was lost (expired and taken, or finished elsewhere): abandon the job, commit nothing."""


class NotReprocessableError(RelayOpsError):
    """This dead letter cannot be reprocessed."""


class ReprocessRateLimitedError(RelayOpsError):
    """Too many reprocesses for this tenant; wait before trying again."""

    def __init__(self, tenant: str, retry_after_seconds: int) -> None:
        self.tenant = tenant
        self.retry_after_seconds = retry_after_seconds
        super().__init__(
            f"tenant {tenant} reached its reprocess limit; try again in {retry_after_seconds} s"
        )


class JobFailure(RelayOpsError):
    """A job's work failed; ``code`` is a classified code, never the raw cause.

    ``usage`` is what the failed attempt spent (a model that answered, but badly): it is recorded on
    the attempt row and counts against the document's budget.
    """

    error_class: ErrorClass = ErrorClass.TRANSIENT

    def __init__(self, code: ErrorCode, message: str | None = None, *, usage: Usage | None = None) -> None:
        self.code = ErrorCode(code)
        self.usage = usage
        super().__init__(message)


class TransientError(JobFailure):
    """A failure that may pass on a later attempt (timeout, unavailable model).

    ``retry_after``: the earliest the next attempt may start, counted from the failure (a server's
    ``Retry-After``); the retry policy never schedules it sooner.
    """

    error_class = ErrorClass.TRANSIENT

    def __init__(
        self, code: ErrorCode, message: str | None = None, *, usage: Usage | None = None,
        retry_after: dt.timedelta | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(code, message, usage=usage)


class PermanentError(JobFailure):
    """A failure no retry can fix (malformed document, schema violation)."""

    error_class = ErrorClass.PERMANENT


class ValidationFailed(PermanentError):
    """The extracted invoice broke a business rule; ``rule`` names it (never the values)."""

    def __init__(self, rule: ValidationRule, *, usage: Usage | None = None) -> None:
        self.rule = ValidationRule(rule)
        super().__init__(ErrorCode.VALIDATION_FAILED, f"rule {self.rule.value} failed", usage=usage)


class BudgetExhaustedError(PermanentError):
    """The document's token or cost ceiling is reached: the next attempt is not made."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.BUDGET_EXHAUSTED)


class JobCancelledError(JobFailure):
    """The job was cancelled; it must not run again."""

    error_class = ErrorClass.CANCELLED

    def __init__(self, code: ErrorCode = ErrorCode.CANCELLED, message: str | None = None) -> None:
        super().__init__(code, message)


class CommitUnsettled(RelayOpsError):
    """A commit met a connection fault and the database stayed away longer than the retry budget:
    whether it landed is unknown here (the lease expires, and the next holder finds out)."""

    def __init__(self, fault: Exception) -> None:
        self.fault = fault
        super().__init__()


class CrashSimulated(BaseException):
    """An injected crash. A BaseException, so no ``except Exception`` handler can absorb it."""

    def __init__(self, point: str) -> None:
        self.point = point
        super().__init__(f"crash injected at {point}")


class ShutdownInterrupt(BaseException):
    """The cluster stops now: abandon the running job; its lease is released, not failed.

    A BaseException, like django-q2's own TimeoutException, so no ``except Exception`` in a job absorbs it.
    """
