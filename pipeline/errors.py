"""The pipeline's exceptions, rooted in relayops.errors. Each class's docstring is its default message."""

from __future__ import annotations

from pipeline.reasons import ErrorClass, ErrorCode
from relayops.errors import InvalidInputError, RelayOpsError

__all__ = [
    "RelayOpsError", "InvalidInputError", "IdempotencyConflictError", "StaleLeaseError", "LeaseLostError",
    "NotReprocessableError", "ReprocessRateLimitedError", "JobFailure", "TransientError", "PermanentError",
    "JobCancelledError", "CrashSimulated", "ShutdownInterrupt", "CommitUnsettled",
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
    """A job's work failed; ``code`` is a classified code, never the raw cause."""

    error_class: ErrorClass = ErrorClass.TRANSIENT

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        super().__init__(message)


class TransientError(JobFailure):
    """A failure that may pass on a later attempt (timeout, unavailable model)."""

    error_class = ErrorClass.TRANSIENT


class PermanentError(JobFailure):
    """A failure no retry can fix (malformed document, schema violation)."""

    error_class = ErrorClass.PERMANENT


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
