"""Bad input never reaches the queue: each refusal is a 4xx problem+json naming the field and why, and
nothing is written."""

from __future__ import annotations

import pytest
from django.test import override_settings

from ingest.keys import create_api_key
from ingest.models import ApiKey
from pipeline.models import Attempt, Job
from tests.ingest.conftest import ApiClient, assert_problem, document

pytestmark = pytest.mark.django_db

GOOD = document("INV-1")

BAD_BODIES = {
    "malformed JSON": (b'{"document_id": "INV-1", "content": ', 400, "body"),
    "not UTF-8": ('{"document_id": "INV-1", "content": "caf\xe9"}'.encode("latin-1"), 400, "body"),
    "NaN": (b'{"document_id": "INV-1", "content": "x", "metadata": {"n": NaN}}', 400, "body"),
    "infinity": (b'{"document_id": "INV-1", "content": "x", "metadata": {"n": 1e999}}', 400, "body"),
    "empty body": (b"", 422, "body"),
    "a list": (b"[]", 422, "body"),
    "missing document_id": ({"content": "x"}, 422, "document_id"),
    "missing content": ({"document_id": "INV-1"}, 422, "content"),
    "extra field": ({**GOOD, "priority": 5}, 422, "priority"),
    "tenant in the body": ({**GOOD, "tenant": "acme"}, 422, "tenant"),
    "document_id not a string": ({**GOOD, "document_id": 12}, 422, "document_id"),
    "empty document_id": ({**GOOD, "document_id": ""}, 422, "document_id"),
    "document_id too long": ({**GOOD, "document_id": "x" * 256}, 422, "document_id"),
    "document_id unprintable": ({**GOOD, "document_id": "INV\n1"}, 422, "document_id"),
    "document_id with NUL": ({**GOOD, "document_id": "INV\x001"}, 422, "document_id"),
    "version a string": ({**GOOD, "operation_version": "1"}, 422, "operation_version"),
    "version a bool": ({**GOOD, "operation_version": True}, 422, "operation_version"),
    "version a float": ({**GOOD, "operation_version": 1.0}, 422, "operation_version"),
    "version zero": ({**GOOD, "operation_version": 0}, 422, "operation_version"),
    "version too big": ({**GOOD, "operation_version": 2**31}, 422, "operation_version"),
    "content not a string": ({**GOOD, "content": {"text": "x"}}, 422, "content"),
    "empty content": ({**GOOD, "content": ""}, 422, "content"),
    "blank content": ({**GOOD, "content": " \n\t "}, 422, "content"),
    "content with NUL": ({**GOOD, "content": "INVOICE\x00"}, 422, "content"),
    "content with a lone surrogate": (b'{"document_id": "INV-1", "content": "x\\ud800y"}', 422, "content"),
    "metadata not an object": ({**GOOD, "metadata": [1, 2]}, 422, "metadata"),
    "metadata too deep": ({**GOOD, "metadata": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}}, 422,
                          "metadata"),
    "metadata with NUL": ({**GOOD, "metadata": {"k\x00": "v"}}, 422, "metadata"),
    "deadline negative": ({**GOOD, "deadline_seconds": -5}, 422, "deadline_seconds"),
    "deadline zero": ({**GOOD, "deadline_seconds": 0}, 422, "deadline_seconds"),
    "deadline a string": ({**GOOD, "deadline_seconds": "60"}, 422, "deadline_seconds"),
    "deadline too far": ({**GOOD, "deadline_seconds": 10**9}, 422, "deadline_seconds"),
}


def counts() -> tuple[int, int, int]:
    return Job.objects.count(), Attempt.objects.count(), ApiKey.objects.count()


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_a_bad_body_is_a_4xx_problem_naming_the_field_and_writes_nothing(acme, case):
    body, status, field = BAD_BODIES[case]
    before = counts()
    problem = assert_problem(acme.post("/documents", body), status, field)
    assert counts() == before
    assert "\x00" not in problem["detail"]


def test_a_key_the_key_builder_refuses_is_422_naming_it(db):
    client = ApiClient(create_api_key("t" * 33, "bot").raw)  # the longest tenant name
    problem = assert_problem(client.post("/documents", {**GOOD, "document_id": "x" * 255, "operation_version": 2**31 - 1}),
                             422, "idempotency_key")
    assert "300" in problem["detail"] and Job.objects.count() == 0


def test_the_problem_says_why_without_echoing_the_value(acme):
    secret = "VAT ID: GB123456789"
    problem = assert_problem(acme.post("/documents", {**GOOD, "operation_version": secret}), 422, "operation_version")
    assert secret not in str(problem)
    assert "integer" in problem["errors"][0]["problem"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"])
def test_a_body_that_is_not_declared_json_is_415(acme, content_type):
    assert_problem(acme.post("/documents", GOOD, content_type=content_type), 415, "Content-Type")
    assert Job.objects.count() == 0


@override_settings(RELAYOPS={**__import__("django.conf").conf.settings.RELAYOPS, "INGEST_MAX_BYTES": 2048})
def test_a_body_over_the_limit_is_413_before_it_is_read(acme):
    big = {**GOOD, "content": "x" * 4096}
    problem = assert_problem(acme.post("/documents", big), 413, "body")
    assert problem["max_bytes"] == 2048
    assert acme.post("/documents", {**GOOD, "content": "INVOICE"}).status_code == 201  # under the limit: fine


def test_the_default_limit_is_one_mebibyte(acme):
    assert_problem(acme.post("/documents", {**GOOD, "content": "x" * (1024 * 1024)}), 413, "body")
    assert Job.objects.count() == 0


@pytest.mark.parametrize(("method", "path", "status"), [
    ("get", "/documents", 405),
    ("put", "/documents", 405),
    ("delete", "/jobs/1", 405),
    ("get", "/nothing-here", 404),
    ("get", "/jobs/not-a-number", 422),
    ("get", "/jobs/0", 404),
    ("get", "/jobs/99999999999999999999999", 404),
    ("get", "/documents/INV%001", 422),
    ("get", "/documents/%0A", 404),  # the URL resolver matches no line break
])
def test_wrong_methods_and_paths_are_problems_too(acme, acme_key, method, path, status):
    response = getattr(acme.client, method)(f"/api/v1{path}", headers={"Authorization": f"Bearer {acme_key}"})
    assert_problem(response, status)


def test_a_bad_host_header_is_a_problem_too(acme):
    response = acme.client.get("/api/v1/jobs/1", headers={**acme.headers}, HTTP_HOST="evil.example")
    assert_problem(response, 400)
