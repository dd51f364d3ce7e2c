"""Properties, checked on generated inputs (Hypothesis): the key builder, the retry policy and the
error classifier hold for every input, not only the tabled ones."""

from __future__ import annotations

import datetime as dt
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import (
    IdempotencyConflictError, InvalidInputError, JobCancelledError, PermanentError, StaleLeaseError, TransientError,
)
from pipeline.idempotency import MAX_KEY_LENGTH, build_idempotency_key
from pipeline.reasons import DeadLetterReason, ErrorClass, ErrorCode
from pipeline.retry import PERMANENT_REASONS, Cancel, DeadLetter, Retry, RetryPolicy, classify

tenants = st.from_regex(r"[a-z][a-z0-9-]{1,32}", fullmatch=True)
documents = st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")), min_size=1,
                    max_size=255).filter(str.isprintable)
versions = st.integers(min_value=1, max_value=2**31 - 1)


@given(tenants, documents, versions)
def test_a_valid_triple_builds_its_key_or_names_the_key_too_long(tenant, document, version):
    try:
        key = build_idempotency_key(tenant, document, version)
    except InvalidInputError as exc:
        assert exc.field == "idempotency_key"
        assert len(f"{tenant}:{document}:v{version}") > MAX_KEY_LENGTH
    else:
        assert key == f"{tenant}:{document}:v{version}" and len(key) <= MAX_KEY_LENGTH
        assert key.startswith(f"{tenant}:") and key.endswith(f":v{version}")


@given(st.one_of(st.none(), st.integers(), st.text(max_size=40)), st.one_of(st.none(), st.integers(), st.text(max_size=300)),
       st.one_of(st.none(), st.text(max_size=5), st.integers(min_value=-5, max_value=2**32)))
def test_any_input_gives_a_key_or_a_value_error_naming_its_field(tenant, document, version):
    try:
        key = build_idempotency_key(tenant, document, version)
    except InvalidInputError as exc:
        assert isinstance(exc, ValueError)
        assert exc.field in ("tenant_id", "document_id", "operation_version", "idempotency_key")
    else:
        assert key == f"{tenant}:{document}:v{version}"


@given(tenants, documents, versions, tenants, documents, versions)
def test_distinct_triples_never_share_a_key(t1, d1, v1, t2, d2, v2):
    try:
        k1, k2 = build_idempotency_key(t1, d1, v1), build_idempotency_key(t2, d2, v2)
    except InvalidInputError:
        return
    # Injective: the tenant ends at the first colon, the version (digits) after the last ":v".
    assert (k1 == k2) == ((t1, d1, v1) == (t2, d2, v2))


policies = st.builds(
    RetryPolicy,
    base_delay_seconds=st.floats(min_value=0, max_value=60),
    factor=st.floats(min_value=1, max_value=10),
    max_delay_seconds=st.floats(min_value=60, max_value=3600),
    jitter=st.floats(min_value=0, max_value=0.99),
)
NOW = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)


@settings(max_examples=300)
@given(policies, st.sampled_from(list(ErrorClass)), st.sampled_from(list(ErrorCode)),
       st.integers(min_value=1, max_value=100), st.integers(min_value=1, max_value=100),
       st.floats(min_value=-3600, max_value=7 * 86400), st.integers(min_value=0, max_value=2**32))
def test_every_failure_gets_exactly_one_decision_within_attempts_and_deadline(
        policy, error_class, code, attempt, max_attempts, deadline_in, seed):
    attempt = min(attempt, max_attempts)  # a lease never runs past its budget (checked by the database)
    deadline = NOW + dt.timedelta(seconds=deadline_in)
    decision = policy.decide(error_class, code, attempt=attempt, max_attempts=max_attempts, now=NOW,
                             deadline_at=deadline, rng=random.Random(seed))
    assert sum(isinstance(decision, kind) for kind in (Retry, DeadLetter, Cancel)) == 1
    if isinstance(decision, Retry):
        assert error_class == ErrorClass.TRANSIENT and attempt < max_attempts  # never past max attempts
        assert NOW <= decision.visible_at < deadline  # never past the deadline
        assert decision.code == code
    if error_class == ErrorClass.CANCELLED:
        assert isinstance(decision, Cancel)
    if error_class == ErrorClass.PERMANENT:
        assert decision == DeadLetter(PERMANENT_REASONS.get(code, DeadLetterReason.PERMANENT_ERROR), code)
    if error_class == ErrorClass.TRANSIENT and attempt >= max_attempts:
        assert decision == DeadLetter(DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, code)


@settings(max_examples=300)
@given(policies, st.integers(min_value=-5, max_value=10_000), st.integers(min_value=0, max_value=2**32))
def test_backoff_is_never_negative_nor_past_its_cap(policy, attempt, seed):
    delay = policy.backoff_seconds(attempt, random.Random(seed))
    assert 0 <= delay <= policy.max_delay_seconds


errors = st.one_of(
    st.builds(TransientError, st.sampled_from(list(ErrorCode))),
    st.builds(PermanentError, st.sampled_from(list(ErrorCode))),
    st.builds(JobCancelledError),
    st.builds(IdempotencyConflictError, st.just("acme:doc:v1")),
    st.builds(StaleLeaseError, st.integers(1, 10), st.integers(1, 10)),
    st.sampled_from([TimeoutError, ConnectionError, ValueError, KeyError, RuntimeError, OSError, ArithmeticError])
    .flatmap(lambda kind: st.builds(kind, st.text(max_size=30))),
)


@given(errors)
def test_every_error_has_one_class_and_a_closed_code(error):
    error_class, code = classify(error)
    assert error_class in set(ErrorClass) and code in set(ErrorCode)
