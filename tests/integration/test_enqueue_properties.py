"""Enqueue, on generated inputs (Hypothesis) against real PostgreSQL: one job per key, a repeat is a
no-op, another payload under the same key is refused, bad input writes nothing."""

from __future__ import annotations

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import queue
from pipeline.errors import IdempotencyConflictError, InvalidInputError
from pipeline.idempotency import payload_hash
from pipeline.models import Job
from tests.integration.conftest import row_counts

pytestmark = pytest.mark.django_db

tenants = st.from_regex(r"[a-z][a-z0-9-]{1,32}", fullmatch=True)
documents = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF, blacklist_categories=("Cs", "Co", "Cn")),
                    min_size=1, max_size=60).filter(str.isprintable)
# NUL and lone surrogates are refused (PostgreSQL's JSON cannot hold them): tested below.
texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
payloads = st.dictionaries(texts.filter(bool), json_values, min_size=1, max_size=4)
EXAMPLES = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class Rollback(Exception):
    """Ends one example's savepoint: every example starts from an empty queue."""


def isolated(example):
    def run(*args):
        try:
            with transaction.atomic():
                example(*args)
                raise Rollback
        except Rollback:
            pass
    return run


@EXAMPLES
@given(tenants, documents, st.integers(1, 2**31 - 1), payloads, payloads)
def test_one_job_per_key_a_repeat_is_a_no_op_and_another_payload_is_refused(tenant, document, version, first, other):
    @isolated
    def example(*_):
        job, created = queue.enqueue(tenant, document, version, first)
        assert created and (job.tenant, job.document_id, job.operation_version) == (tenant, document, version)
        assert (job.status, job.attempt, job.fence, job.payload_hash) == ("queued", 0, 0, payload_hash(first))
        again, created_again = queue.enqueue(tenant, document, version, dict(reversed(list(first.items()))))
        assert (again.pk, created_again) == (job.pk, False)  # key order never makes another payload
        before = row_counts()
        if payload_hash(other) != payload_hash(first):
            with pytest.raises(IdempotencyConflictError):
                queue.enqueue(tenant, document, version, other)
        assert row_counts() == before and Job.objects.filter(idempotency_key=job.idempotency_key).count() == 1
    example()


@EXAMPLES
@given(st.one_of(st.none(), st.text(max_size=40), st.integers()), st.one_of(st.none(), st.text(max_size=300)),
       st.one_of(st.integers(-3, 2**32), st.text(max_size=3)), st.integers(-3, 200), st.text(max_size=5))
def test_bad_input_is_refused_naming_a_field_and_writes_nothing(tenant, document, version, max_attempts, text):
    @isolated
    def example(*_):
        before = row_counts()
        try:
            queue.enqueue(tenant, document, version, {"text": text}, max_attempts=max_attempts)
        except InvalidInputError as exc:
            assert exc.field in ("tenant_id", "document_id", "operation_version", "idempotency_key", "max_attempts",
                                 "payload")
            assert exc.field != "payload" or "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text)
            assert row_counts() == before
        else:
            assert row_counts()["Job"] == before["Job"] + 1
    example()
