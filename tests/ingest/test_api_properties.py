"""No client input produces a 500: Hypothesis throws arbitrary bodies, headers and paths at every
endpoint. Each answer is 2xx, or a 4xx problem+json; a refused request wrote nothing, and an accepted
one wrote exactly its one job, whole."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings, strategies as st

from ingest.keys import create_api_key, revoke_api_key
from ingest.models import ApiKey
from pipeline.idempotency import payload_hash
from pipeline.models import Attempt, Job
from tests.ingest.conftest import API

pytestmark = pytest.mark.django_db

# CI replays the same examples every run (a failure there is reproducible); a developer's run explores new ones.
EXAMPLES = settings(max_examples=int(os.environ.get("RELAYOPS_HYPOTHESIS_EXAMPLES", "120")), deadline=None,
                    derandomize=bool(os.environ.get("CI")),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# Text with the characters storage trips on (NUL, lone surrogates) and the ones parsers special-case.
TRICKY = st.text(st.one_of(st.characters(), st.sampled_from("\x00\ud800\udfff\u2028\x7f\n\t \\\"")), max_size=60)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TRICKY,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TRICKY, children, max_size=3),
    max_leaves=8,
)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` four times in five, ``bad`` otherwise: most well-framed requests reach the queue."""
    return st.integers(0, 4).flatmap(lambda n: bad if n == 4 else good)


PRINTABLE = st.text(st.characters(categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=40)
NEAR_VALID = st.fixed_dictionaries(
    {"document_id": mostly(PRINTABLE, TRICKY | JSON), "content": mostly(TRICKY.filter(str.strip), JSON)},
    optional={"operation_version": mostly(st.integers(1, 5), st.integers() | JSON),
              "metadata": mostly(st.dictionaries(TRICKY, JSON, max_size=3), JSON),
              "deadline_seconds": mostly(st.floats(1, 3600), JSON | st.floats())},
).flatmap(lambda body: mostly(st.just(body), st.dictionaries(TRICKY, JSON, max_size=2).map(lambda x: {**x, **body})))
BODIES = st.one_of(
    NEAR_VALID.map(lambda body: json.dumps(body).encode()),
    JSON.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda text: text.encode("utf-8", "surrogatepass")),
)
CONTENT_TYPES = st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", "",
                                 "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"])
HEADER_NAMES = st.from_regex(r"\A[A-Za-z][A-Za-z0-9-]{0,20}\Z").filter(
    lambda name: name.lower() not in ("content-type", "content-length", "host"))
HEADER_VALUES = st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=40)


@pytest.fixture
def keys(db) -> dict[str, str]:
    revoked = create_api_key("acme", "old")
    revoke_api_key(revoked.key.pk)
    return {"acme": create_api_key("acme", "bot").raw, "globex": create_api_key("globex", "bot").raw,
            "revoked": revoked.raw}


def authorization(keys: dict[str, str]) -> st.SearchStrategy[str | None]:
    return st.one_of(
        st.none(), st.sampled_from([f"Bearer {key}" for key in keys.values()]), HEADER_VALUES,
        st.sampled_from(list(keys.values())), st.just("Bearer "), HEADER_VALUES.map(lambda v: f"Bearer {v}"),
    )


def rows() -> dict[str, list[dict[str, Any]]]:
    return {"jobs": list(Job.objects.order_by("pk").values()), "attempts": list(Attempt.objects.values()),
            "keys": list(ApiKey.objects.order_by("pk").values())}


def headers_of(auth: str | None, extra: dict[str, str]) -> dict[str, str]:
    return {**extra, **({"Authorization": auth} if auth is not None else {})}


def check_answer(response, before: dict[str, list[dict[str, Any]]]) -> None:
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        assert response["Content-Type"] == "application/problem+json"
        problem = response.json()
        assert problem["status"] == response.status_code and problem["detail"]
        assert rows() == before  # a refused request wrote nothing
    else:
        assert response["Content-Type"].startswith("application/json")


@given(data=st.data())
@EXAMPLES
def test_post_documents_never_answers_500_and_writes_one_whole_job_or_nothing(keys, data):
    if data.draw(st.booleans(), label="well framed"):  # half the requests get past the key and the parser
        body = data.draw(NEAR_VALID.map(lambda value: json.dumps(value).encode()))
        auth, content_type = f"Bearer {keys['acme']}", "application/json"
    else:
        body, auth, content_type = data.draw(BODIES), data.draw(authorization(keys)), data.draw(CONTENT_TYPES)
    extra = data.draw(st.dictionaries(HEADER_NAMES, HEADER_VALUES, max_size=3))
    before = rows()
    response = Client().post(f"{API}/documents", data=body, content_type=content_type, headers=headers_of(auth, extra))
    check_answer(response, before)
    if response.status_code in (200, 201):
        answer = response.json()
        after = rows()
        new = [job for job in after["jobs"] if job not in before["jobs"]]
        assert len(new) == (1 if response.status_code == 201 else 0)
        job = Job.objects.get(pk=answer["job_id"])
        sent = json.loads(body)
        assert (job.document_id, job.operation_version) == (sent["document_id"], sent.get("operation_version", 1))
        # The payload is the one sent: its text exactly, and the hash of text and metadata (jsonb keeps
        # numbers as exact decimals, so a float read back is not the float sent, but the hash was taken of it).
        assert job.payload["text"] == sent["content"]
        assert job.payload_hash == payload_hash({"text": sent["content"], "metadata": sent.get("metadata") or {}})
        assert after["attempts"] == before["attempts"] and after["keys"] == before["keys"]


@given(data=st.data())
@EXAMPLES
def test_get_jobs_never_answers_500(keys, data):
    from pipeline import queue

    mine, _ = queue.enqueue("acme", "mine", 1, {"text": "x", "metadata": {}})
    theirs, _ = queue.enqueue("globex", "theirs", 1, {"text": "y", "metadata": {}})
    segment = data.draw(st.one_of(
        st.sampled_from([str(mine.pk), str(theirs.pk)]), st.integers().map(str), st.text(max_size=30).map(quote),
    ))
    auth = data.draw(authorization(keys))
    extra = data.draw(st.dictionaries(HEADER_NAMES, HEADER_VALUES, max_size=3))
    before = rows()
    response = Client().get(f"{API}/jobs/{segment}", headers=headers_of(auth, extra))
    check_answer(response, before)
    if response.status_code == 200:  # only a tenant's own job, with that tenant's live key
        owner = {mine.pk: "acme", theirs.pk: "globex"}[response.json()["id"]]
        assert auth == f"Bearer {keys[owner]}"


@given(data=st.data())
@EXAMPLES
def test_get_documents_never_answers_500(keys, data):
    segment = data.draw(st.one_of(st.just("INV-1"), st.text(max_size=40).map(lambda t: quote(t, safe="/"))))
    auth = data.draw(authorization(keys))
    before = rows()
    response = Client().get(f"{API}/documents/{segment}", headers=headers_of(auth, {}))
    check_answer(response, before)
