"""The retry policy as tables: every failure gets exactly one of retry, dead-letter or cancel."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from pipeline.errors import (
    IdempotencyConflictError, JobCancelledError, PermanentError, StaleLeaseError, TransientError,
)
from pipeline.reasons import DeadLetterReason, ErrorClass, ErrorCode
from pipeline.errors import InvalidInputError
from pipeline.retry import Cancel, DeadLetter, Retry, RetryPolicy, classify

NOW = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)
LATER = NOW + dt.timedelta(hours=1)
POLICY = RetryPolicy(base_delay_seconds=2.0, factor=2.0, max_delay_seconds=60.0, jitter=0.2)

T, P, C = ErrorClass.TRANSIENT, ErrorClass.PERMANENT, ErrorClass.CANCELLED
UNAVAILABLE, MALFORMED = ErrorCode.EXTRACTOR_UNAVAILABLE, ErrorCode.DOCUMENT_MALFORMED


class FixedRng:
    """Returns ``a + (b - a) * at``: 0 is the low jitter bound, 1 the high one."""

    def __init__(self, at: float) -> None:
        self.at = at

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.at


MID = FixedRng(0.5)


@pytest.mark.parametrize(
    ("error_class", "code", "attempt", "max_attempts", "deadline", "expected"),
    [
        # retry only while attempt < max_attempts, after base * factor ** (attempt - 1)
        (T, UNAVAILABLE, 1, 3, LATER, Retry(NOW + dt.timedelta(seconds=2), UNAVAILABLE)),
        (T, UNAVAILABLE, 2, 3, LATER, Retry(NOW + dt.timedelta(seconds=4), UNAVAILABLE)),
        (T, ErrorCode.UNCLASSIFIED, 9, 10, LATER, Retry(NOW + dt.timedelta(seconds=60), ErrorCode.UNCLASSIFIED)),
        # transient failures exhaust the attempts: the DLQ, never a fourth attempt
        (T, UNAVAILABLE, 3, 3, LATER, DeadLetter(DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, UNAVAILABLE)),
        (T, UNAVAILABLE, 4, 3, LATER, DeadLetter(DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, UNAVAILABLE)),
        (T, UNAVAILABLE, 1, 1, LATER, DeadLetter(DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, UNAVAILABLE)),
        # permanent errors go to the DLQ on the first attempt, whatever attempts remain
        (P, MALFORMED, 1, 3, LATER, DeadLetter(DeadLetterReason.PERMANENT_ERROR, MALFORMED)),
        (P, ErrorCode.SCHEMA_INVALID, 1, 100, LATER,
         DeadLetter(DeadLetterReason.PERMANENT_ERROR, ErrorCode.SCHEMA_INVALID)),
        (P, MALFORMED, 3, 3, LATER, DeadLetter(DeadLetterReason.PERMANENT_ERROR, MALFORMED)),
        # cancellation is never retried and never dead-lettered
        (C, ErrorCode.CANCELLED, 1, 3, LATER, Cancel(ErrorCode.CANCELLED)),
        (C, ErrorCode.CANCELLED, 3, 3, LATER, Cancel(ErrorCode.CANCELLED)),
        # a retry that could only start at or after the deadline: cancel now, don't burn an attempt
        (T, UNAVAILABLE, 1, 3, NOW + dt.timedelta(seconds=2), Cancel(ErrorCode.DEADLINE_UNREACHABLE)),
        (T, UNAVAILABLE, 2, 3, NOW + dt.timedelta(seconds=3), Cancel(ErrorCode.DEADLINE_UNREACHABLE)),
        (T, UNAVAILABLE, 1, 3, NOW - dt.timedelta(seconds=1), Cancel(ErrorCode.DEADLINE_UNREACHABLE)),
        (T, UNAVAILABLE, 1, 3, NOW + dt.timedelta(seconds=2.001), Retry(NOW + dt.timedelta(seconds=2), UNAVAILABLE)),
        # exhausted attempts are dead-lettered even when the deadline is also near
        (T, UNAVAILABLE, 3, 3, NOW, DeadLetter(DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, UNAVAILABLE)),
    ],
)
def test_decide(error_class, code, attempt, max_attempts, deadline, expected):
    decision = POLICY.decide(
        error_class, code, attempt=attempt, max_attempts=max_attempts, now=NOW, deadline_at=deadline, rng=MID,
    )
    assert decision == expected


@pytest.mark.parametrize("error_class", list(ErrorClass))
@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_every_class_gets_exactly_one_of_three_decisions(error_class, attempt):
    decision = POLICY.decide(
        error_class, ErrorCode.UNCLASSIFIED, attempt=attempt, max_attempts=3, now=NOW, deadline_at=LATER, rng=MID,
    )
    assert type(decision) in (Retry, DeadLetter, Cancel)
    if isinstance(decision, Retry):
        assert attempt < 3 and error_class == T


@pytest.mark.parametrize("attempt", range(1, 12))
def test_backoff_stays_within_the_jitter_bounds_and_never_above_the_cap(attempt):
    raw = 2.0 * 2.0 ** (attempt - 1)
    low, high = min(raw * 0.8, 60.0), min(raw * 1.2, 60.0)
    assert POLICY.backoff_seconds(attempt, FixedRng(0.0)) == pytest.approx(low)
    assert POLICY.backoff_seconds(attempt, FixedRng(1.0)) == pytest.approx(high)
    rng = random.Random(attempt)
    samples = [POLICY.backoff_seconds(attempt, rng) for _ in range(200)]
    assert all(low <= s <= high <= 60.0 for s in samples)
    if high > low:
        assert max(samples) - min(samples) > (high - low) * 0.5  # the jitter really spreads retries


def test_no_jitter_gives_the_exact_exponential_curve():
    policy = RetryPolicy(base_delay_seconds=1.0, factor=3.0, max_delay_seconds=20.0, jitter=0.0)
    assert [policy.backoff_seconds(a, random.Random(0)) for a in range(1, 6)] == [1.0, 3.0, 9.0, 20.0, 20.0]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_delay_seconds": -1.0},
        {"base_delay_seconds": 10.0, "max_delay_seconds": 5.0},
        {"factor": 0.5},
        {"jitter": 1.0},
        {"jitter": -0.1},
    ],
)
def test_policy_refuses_bad_configuration(kwargs):
    with pytest.raises(InvalidInputError):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (TransientError(ErrorCode.EXTRACTOR_TIMEOUT), (T, ErrorCode.EXTRACTOR_TIMEOUT)),
        (PermanentError(ErrorCode.SCHEMA_INVALID), (P, ErrorCode.SCHEMA_INVALID)),
        (JobCancelledError(), (C, ErrorCode.CANCELLED)),
        (IdempotencyConflictError("acme:doc:v1"), (P, ErrorCode.IDEMPOTENCY_CONFLICT)),
        (TimeoutError("model took too long"), (T, ErrorCode.EXTRACTOR_TIMEOUT)),
        (ConnectionRefusedError("model host down"), (T, ErrorCode.EXTRACTOR_UNAVAILABLE)),
        # unknown exceptions are documented as transient / unclassified: bounded retries, then the DLQ
        (ValueError("could not parse 'CPF 123.456.789-00'"), (T, ErrorCode.UNCLASSIFIED)),
        (KeyError("total"), (T, ErrorCode.UNCLASSIFIED)),
        (RuntimeError(), (T, ErrorCode.UNCLASSIFIED)),
        (StaleLeaseError(1, 1), (T, ErrorCode.UNCLASSIFIED)),
    ],
)
def test_classify(error, expected):
    assert classify(error) == expected


def test_classify_never_reads_the_message():
    assert classify(ValueError("permanent")) == classify(ValueError("cancelled")) == (T, ErrorCode.UNCLASSIFIED)
    assert classify(PermanentError(MALFORMED, "transient, retry me")) == (P, MALFORMED)


@pytest.mark.parametrize(("not_before", "expected"), [
    (None, Retry(NOW + dt.timedelta(seconds=2), ErrorCode.LLM_RATE_LIMITED)),  # the backoff
    (NOW + dt.timedelta(seconds=1), Retry(NOW + dt.timedelta(seconds=2), ErrorCode.LLM_RATE_LIMITED)),  # backoff later
    (NOW + dt.timedelta(seconds=30), Retry(NOW + dt.timedelta(seconds=30), ErrorCode.LLM_RATE_LIMITED)),  # honoured
    (LATER, Cancel(ErrorCode.DEADLINE_UNREACHABLE)),  # could only start at the deadline
])
def test_a_retry_never_starts_before_not_before(not_before, expected):
    decision = POLICY.decide(T, ErrorCode.LLM_RATE_LIMITED, attempt=1, max_attempts=3, now=NOW, deadline_at=LATER,
                             rng=MID, not_before=not_before)
    assert decision == expected


def test_retry_after_on_a_transient_error_is_the_not_before_time():
    from pipeline.retry import not_before

    assert not_before(TransientError(ErrorCode.LLM_RATE_LIMITED, retry_after=dt.timedelta(seconds=7)), NOW) == (
        NOW + dt.timedelta(seconds=7))
    assert not_before(TransientError(ErrorCode.LLM_SERVER_ERROR), NOW) is None
    assert not_before(ValueError(), NOW) is None


def test_an_exhausted_budget_is_its_own_dead_letter_reason():
    from pipeline.errors import BudgetExhaustedError, ValidationFailed
    from pipeline.reasons import ValidationRule

    error_class, code = classify(BudgetExhaustedError())
    assert (error_class, code) == (P, ErrorCode.BUDGET_EXHAUSTED)
    assert POLICY.decide(P, code, attempt=1, max_attempts=3, now=NOW, deadline_at=LATER) == DeadLetter(
        DeadLetterReason.BUDGET_EXHAUSTED, ErrorCode.BUDGET_EXHAUSTED)
    assert classify(ValidationFailed(ValidationRule.TOTAL)) == (P, ErrorCode.VALIDATION_FAILED)
