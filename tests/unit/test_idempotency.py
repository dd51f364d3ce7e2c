"""build_idempotency_key and payload_hash: pure functions, no database."""

from __future__ import annotations

import hashlib
import math

import pytest

from pipeline.errors import InvalidInputError
from pipeline.idempotency import build_idempotency_key, canonical_json, payload_hash


@pytest.mark.parametrize(
    ("tenant", "document", "version", "key"),
    [
        ("acme", "doc-1", 1, "acme:doc-1:v1"),
        ("ab", "d", 2, "ab:d:v2"),  # shortest tenant the pattern allows
        ("a" + "b" * 32, "x", 1, "a" + "b" * 32 + ":x:v1"),  # longest tenant (33)
        ("globex-2", "x" * 255, 7, "globex-2:" + "x" * 255 + ":v7"),  # longest document id
        ("acme", "fatura ção/2026 #1", 10**6, "acme:fatura ção/2026 #1:v1000000"),
        ("acme", "a:v1", 2, "acme:a:v1:v2"),
    ],
)
def test_valid_fields_build_tenant_document_version(tenant, document, version, key):
    assert build_idempotency_key(tenant, document, version) == key


@pytest.mark.parametrize(
    ("tenant", "document", "version", "field"),
    [
        (None, "doc", 1, "tenant_id"),
        ("", "doc", 1, "tenant_id"),
        ("a", "doc", 1, "tenant_id"),  # one character is too short
        ("a" + "b" * 33, "doc", 1, "tenant_id"),  # 34 characters
        ("Acme", "doc", 1, "tenant_id"),
        ("1acme", "doc", 1, "tenant_id"),
        ("-acme", "doc", 1, "tenant_id"),
        ("ac_me", "doc", 1, "tenant_id"),
        ("acme:x", "doc", 1, "tenant_id"),  # a colon would make keys ambiguous
        ("acme\n", "doc", 1, "tenant_id"),
        (b"acme", "doc", 1, "tenant_id"),
        ("acme", None, 1, "document_id"),
        ("acme", "", 1, "document_id"),
        ("acme", 42, 1, "document_id"),
        ("acme", "x" * 256, 1, "document_id"),
        ("acme", "doc\x00", 1, "document_id"),
        ("acme", "doc\nline", 1, "document_id"),
        ("acme", "doc", 0, "operation_version"),
        ("acme", "doc", -1, "operation_version"),
        ("acme", "doc", True, "operation_version"),  # a bool is not an int here
        ("acme", "doc", False, "operation_version"),
        ("acme", "doc", 1.0, "operation_version"),
        ("acme", "doc", "1", "operation_version"),
        ("acme", "doc", None, "operation_version"),
        ("BAD", "", 0, "tenant_id"),  # the first invalid field is the one named
        ("acme", "", 0, "document_id"),
    ],
)
def test_invalid_field_raises_value_error_naming_it(tenant, document, version, field):
    with pytest.raises(ValueError) as info:
        build_idempotency_key(tenant, document, version)
    assert isinstance(info.value, InvalidInputError)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_distinct_triples_never_share_a_key():
    triples = [
        ("acme", "doc", 1), ("globex", "doc", 1), ("acme", "doc", 2), ("acme", "doc:v1", 1),
        ("acme", "doc:v1", 2), ("acme", "doc", 12), ("acme", "doc:v1:v", 2), ("acme-doc", "v1", 1),
    ]
    keys = [build_idempotency_key(*triple) for triple in triples]
    assert len(set(keys)) == len(triples)


def test_payload_hash_is_sha256_of_canonical_json():
    assert canonical_json({"b": [1, 2], "a": "x"}) == '{"a":"x","b":[1,2]}'
    assert payload_hash({"a": 1}) == hashlib.sha256(b'{"a":1}').hexdigest()


def test_payload_hash_ignores_key_order_at_every_depth():
    one = {"text": "INV-1", "meta": {"pages": 2, "lang": "pt"}, "tags": ["a", "b"]}
    two = {"tags": ["a", "b"], "meta": {"lang": "pt", "pages": 2}, "text": "INV-1"}
    assert payload_hash(one) == payload_hash(two)
    assert len(payload_hash(one)) == 64


@pytest.mark.parametrize(
    ("one", "two"),
    [
        ({"a": 1}, {"a": 2}),
        ({"a": 1}, {"a": "1"}),
        ({"tags": ["a", "b"]}, {"tags": ["b", "a"]}),  # list order is data
        ({"a": None}, {}),
        ({"text": "x"}, {"text": "x "}),
    ],
)
def test_payload_hash_differs_for_different_payloads(one, two):
    assert payload_hash(one) != payload_hash(two)


@pytest.mark.parametrize("payload", [{"a": {1, 2}}, {"a": math.nan}, {"a": math.inf}, object(), {"a": b"x"}])
def test_non_json_payload_is_refused(payload):
    with pytest.raises(InvalidInputError) as info:
        payload_hash(payload)
    assert info.value.field == "payload"
