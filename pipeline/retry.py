"""Retry policy: every error gets a class, and every failure exactly one decision.

Decisions are ``Retry`` (backoff with jitter, never sooner than a server's ``Retry-After``, only while
``attempt < max_attempts`` and only if it can start before the deadline), ``DeadLetter``
(``permanent_error`` at once for permanent errors, ``budget_exhausted`` for a spent budget,
``max_attempts_exceeded`` when transient errors exhaust the attempts) or ``Cancel``. No fourth outcome.

Unknown exceptions are classified **transient** with code ``unclassified``: a bug or an unexpected
library error gets the bounded retries and then lands in the DLQ, never loops forever.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from typing import Protocol, Union

from pipeline.errors import IdempotencyConflictError, InvalidInputError, JobFailure
from pipeline.reasons import DeadLetterReason, ErrorClass, ErrorCode


@dataclass(frozen=True)
class Retry:
    visible_at: dt.datetime
    code: ErrorCode


@dataclass(frozen=True)
class DeadLetter:
    reason: DeadLetterReason
    code: ErrorCode


@dataclass(frozen=True)
class Cancel:
    code: ErrorCode


Decision = Union[Retry, DeadLetter, Cancel]


class Random(Protocol):
    def uniform(self, a: float, b: float) -> float: ...


# Permanent codes with a dead-letter reason of their own; every other permanent code is permanent_error.
PERMANENT_REASONS = {ErrorCode.BUDGET_EXHAUSTED: DeadLetterReason.BUDGET_EXHAUSTED}


def not_before(error: BaseException, now: dt.datetime) -> dt.datetime | None:
    """The earliest a retry of ``error`` may start: now + its ``retry_after`` (a server's Retry-After)."""
    retry_after = getattr(error, "retry_after", None) if isinstance(error, JobFailure) else None
    return now + retry_after if isinstance(retry_after, dt.timedelta) else None


def classify(error: BaseException) -> tuple[ErrorClass, ErrorCode]:
    """Map an exception to its class and code. The exception's text is never looked at."""
    if isinstance(error, JobFailure):
        return error.error_class, error.code
    if isinstance(error, IdempotencyConflictError):
        return ErrorClass.PERMANENT, ErrorCode.IDEMPOTENCY_CONFLICT
    if isinstance(error, TimeoutError):
        return ErrorClass.TRANSIENT, ErrorCode.EXTRACTOR_TIMEOUT
    if isinstance(error, ConnectionError):
        return ErrorClass.TRANSIENT, ErrorCode.EXTRACTOR_UNAVAILABLE
    return ErrorClass.TRANSIENT, ErrorCode.UNCLASSIFIED


@dataclass(frozen=True)
class RetryPolicy:
    base_delay_seconds: float = 1.0
    factor: float = 2.0
    max_delay_seconds: float = 300.0
    jitter: float = 0.2  # +/- this fraction of the delay

    def __post_init__(self) -> None:
        if self.base_delay_seconds < 0 or self.max_delay_seconds < self.base_delay_seconds:
            raise InvalidInputError("max_delay_seconds", "delays must satisfy 0 <= base <= max")
        if self.factor < 1:
            raise InvalidInputError("factor", "must be >= 1")
        if not 0 <= self.jitter < 1:
            raise InvalidInputError("jitter", "must be in [0, 1)")

    def backoff_seconds(self, attempt: int, rng: Random = random) -> float:
        """Exponential delay after failed attempt ``attempt`` (1-based), with jitter, capped."""
        delay = self.base_delay_seconds * self.factor ** min(max(attempt - 1, 0), 64)
        return min(delay * (1 + rng.uniform(-self.jitter, self.jitter)), self.max_delay_seconds)

    def decide(
        self,
        error_class: ErrorClass,
        code: ErrorCode,
        *,
        attempt: int,
        max_attempts: int,
        now: dt.datetime,
        deadline_at: dt.datetime,
        rng: Random = random,
        not_before: dt.datetime | None = None,
    ) -> Decision:
        """The one decision for a failed attempt. ``not_before``: the retry never starts sooner."""
        if error_class == ErrorClass.CANCELLED:
            return Cancel(code)
        if error_class == ErrorClass.PERMANENT:
            return DeadLetter(PERMANENT_REASONS.get(code, DeadLetterReason.PERMANENT_ERROR), code)
        if attempt >= max_attempts:
            return DeadLetter(DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, code)
        visible_at = now + dt.timedelta(seconds=self.backoff_seconds(attempt, rng))
        if not_before is not None and not_before > visible_at:
            visible_at = not_before
        if visible_at >= deadline_at:
            # The retry could only start after the deadline: cancel now, don't burn an attempt.
            return Cancel(ErrorCode.DEADLINE_UNREACHABLE)
        return Retry(visible_at, code)


DEFAULT_POLICY = RetryPolicy()
