"""The ingest API's contract: 201 / 200 / 409 on POST, job and document status, tenant isolation, keys."""

from __future__ import annotations

import pytest

from ingest.keys import revoke_api_key
from ingest.models import ApiKey
from pipeline import queue, relay
from pipeline.models import Job, Review
from pipeline.reviews import decide_review
from pipeline.worker import process_once
from tests.admin import factories
from tests.ingest.conftest import API, ApiClient, assert_problem, document

pytestmark = pytest.mark.django_db


def test_a_new_document_is_201_with_the_job_its_key_status_and_status_url(acme):
    response = acme.post("/documents", document("INV-1"))
    assert response.status_code == 201, response.content
    body = response.json()
    job = Job.objects.get()
    assert body == {"job_id": job.pk, "idempotency_key": "acme:INV-1:v1", "status": "queued",
                    "status_url": f"http://testserver{API}/jobs/{job.pk}", "created": True}
    assert (job.tenant, job.document_id, job.operation_version) == ("acme", "INV-1", 1)
    assert job.payload == {"text": document("INV-1")["content"], "metadata": {}}


def test_the_same_request_again_is_200_with_the_existing_job_and_writes_nothing(acme):
    first = acme.post("/documents", document("INV-1", metadata={"source": "mail"})).json()
    before = list(Job.objects.values())
    again = acme.post("/documents", document("INV-1", metadata={"source": "mail"}))
    assert again.status_code == 200
    assert again.json() == {**first, "created": False}
    assert list(Job.objects.values()) == before


@pytest.mark.parametrize("change", [
    {"content": "Another invoice text"},
    {"metadata": {"source": "upload"}},  # the hash covers content and metadata
])
def test_the_same_key_with_another_payload_is_a_409_naming_the_key(acme, change):
    first = acme.post("/documents", document("INV-1", metadata={"source": "mail"})).json()
    before = list(Job.objects.values())
    body = assert_problem(acme.post("/documents", {**document("INV-1", metadata={"source": "mail"}), **change}), 409)
    assert body["idempotency_key"] == "acme:INV-1:v1"
    assert body["job_id"] == first["job_id"]
    assert "acme:INV-1:v1" in body["detail"]
    assert list(Job.objects.values()) == before


def test_a_new_version_of_the_same_document_is_a_new_job(acme):
    one = acme.post("/documents", document("INV-1")).json()
    two = acme.post("/documents", document("INV-1", seed=2, operation_version=2))
    assert two.status_code == 201
    assert two.json()["idempotency_key"] == "acme:INV-1:v2" and two.json()["job_id"] != one["job_id"]


def test_the_tenant_comes_from_the_key_never_from_the_body(acme, globex):
    assert_problem(acme.post("/documents", document("INV-1", tenant="globex")), 422, "tenant")
    acme.post("/documents", document("INV-1"))
    globex.post("/documents", document("INV-1", seed=2))  # the same document id in another tenant: no conflict
    assert sorted(Job.objects.values_list("idempotency_key", flat=True)) == ["acme:INV-1:v1", "globex:INV-1:v1"]


def test_a_job_succeeds_and_its_status_shows_fields_timings_and_the_review(acme, clock):
    posted = acme.post("/documents", document("INV-7", seed=7, deadline_seconds=600)).json()
    status = acme.get(f"/jobs/{posted['job_id']}").json()
    assert status["status"] == "queued" and status["fields"] is None
    assert status["timings"] == {"queue_wait_seconds": None, "inference_seconds": None, "review_wait_seconds": None}

    assert process_once("w1").outcome == "committed"
    relay.publish_pending()
    status = acme.get(f"/jobs/{posted['job_id']}").json()
    assert status["status"] == "succeeded" and status["attempts"] == 1
    from pipeline.extraction import synthetic
    assert status["fields"] == synthetic.valid(7).fields
    assert status["review"] == {"status": "pending", "decided_at": None, "decision": None, "corrected_fields": None}
    timings = status["timings"]
    assert timings["queue_wait_seconds"] >= 0 and timings["inference_seconds"] > 0
    assert timings["review_wait_seconds"] is None  # pending: not known yet
    assert status["attempt_log"][0]["extractor"] == "rules" and status["attempt_log"][0]["input_tokens"] is None

    operator = factories.member("op", "acme")
    assert decide_review(Review.objects.get().pk, "approved", operator)
    status = acme.get(f"/jobs/{posted['job_id']}").json()
    assert status["review"]["status"] == "approved"
    assert status["timings"]["review_wait_seconds"] >= 0


def test_a_failed_rule_is_in_the_status_by_code(acme):
    from pipeline.extraction import synthetic

    bad = synthetic.failing("total", 3)
    posted = acme.post("/documents", {"document_id": "bad", "content": bad.text}).json()
    assert process_once("w1").outcome == "dead_lettered"
    status = acme.get(f"/jobs/{posted['job_id']}").json()
    assert (status["status"], status["reason"], status["error_code"], status["failed_rule"]) == (
        "dead_lettered", "permanent_error", "validation_failed", "total")
    assert status["fields"] is None


def test_another_tenants_job_is_404_exactly_like_a_missing_one(acme, globex):
    theirs = globex.post("/documents", document("G-1")).json()["job_id"]
    other = assert_problem(acme.get(f"/jobs/{theirs}"), 404)
    missing = assert_problem(acme.get(f"/jobs/{theirs + 1000}"), 404)
    assert {k: v for k, v in other.items() if k not in ("detail", "instance")} == {
        k: v for k, v in missing.items() if k not in ("detail", "instance")}
    assert str(theirs) in other["detail"] and "globex" not in str(other)
    assert_problem(acme.get("/documents/G-1"), 404)


def test_every_version_of_a_document(acme, globex):
    acme.post("/documents", document("INV/9 a", seed=1))
    acme.post("/documents", document("INV/9 a", seed=2, operation_version=2))
    globex.post("/documents", document("INV/9 a", seed=3))
    body = acme.get("/documents/INV/9%20a").json()
    assert body["document_id"] == "INV/9 a"
    assert [(v["operation_version"], v["status"], v["idempotency_key"]) for v in body["versions"]] == [
        (1, "queued", "acme:INV/9 a:v1"), (2, "queued", "acme:INV/9 a:v2")]
    assert all(v["status_url"].endswith(f"/jobs/{v['job_id']}") for v in body["versions"])


@pytest.mark.parametrize(("header", "field"), [
    (None, "Authorization"),
    ("Basic dXNlcjpwYXNz", "Authorization"),
    ("Bearer ", "Authorization"),
    ("Bearer not-a-key", "Authorization"),
    ("Bearer rk_0123abcd_" + "A" * 43, "API key"),
])
def test_a_missing_or_bad_key_is_401_and_writes_nothing(db, header, field):
    client = ApiClient(None)
    headers = {"Authorization": header} if header else {}
    for response in (client.post("/documents", document(), **headers), client.get("/jobs/1", **headers),
                     client.get("/documents/INV-1", **headers)):
        body = assert_problem(response, 401, field)
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert "rk_0123abcd" not in str(body)
    assert Job.objects.count() == 0


def test_a_revoked_key_is_refused_from_its_next_request(acme, acme_key):
    assert acme.post("/documents", document("INV-1")).status_code == 201
    assert revoke_api_key(ApiKey.objects.get().pk, by="op")
    assert_problem(acme.post("/documents", document("INV-2")), 401, "API key")
    assert_problem(acme.get(f"/jobs/{Job.objects.get().pk}"), 401, "API key")
    assert Job.objects.count() == 1


def test_jobs_enqueued_by_code_are_visible_through_the_api_too(acme):
    job, _ = queue.enqueue("acme", "from-code", 1, {"text": "x", "metadata": {}})
    assert acme.get(f"/jobs/{job.pk}").json()["idempotency_key"] == "acme:from-code:v1"


def test_the_openapi_schema_is_served_without_a_key(db):
    schema = ApiClient(None).get("/openapi.json").json()
    assert {"/api/v1/documents", "/api/v1/jobs/{job_id}", "/api/v1/documents/{document_id}"} <= set(schema["paths"])
    body = schema["components"]["schemas"]["DocumentIn"]
    assert body["additionalProperties"] is False
    assert set(body["required"]) == {"document_id", "content"}
    assert schema["components"]["securitySchemes"]


def test_the_api_docs_page_loads_its_javascript_from_our_static_files_not_a_cdn(db):
    from django.contrib.staticfiles import finders

    response = ApiClient(None).get("/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<script src="/static/ninja/swagger-ui-bundle.js">' in page
    assert '<script src="/static/ninja/swagger-ui-init.js">' in page
    assert "cdn" not in page.lower() and "https://" not in page
    assert f'"url": "{API}/openapi.json"' in page and '"validatorUrl": null' in page
    assert all(finders.find(f"ninja/{name}") for name in ("swagger-ui-bundle.js", "swagger-ui-init.js", "swagger-ui.css"))


def test_the_status_shows_the_review_decision_and_a_corrections_final_values(acme):
    from review.decisions import decide
    from tenancy.roles import ensure_roles

    ensure_roles()
    posted = acme.post("/documents", document("INV-9", seed=9)).json()
    assert process_once("w1").outcome == "committed"
    relay.publish_pending()
    operator = factories.member("op", "acme")
    decide(Review.objects.get().pk, "correct", operator, values={"vendor": "Corrected Vendor Ltd"})
    status = acme.get(f"/jobs/{posted['job_id']}").json()
    assert status["review"]["status"] == "approved" and status["review"]["decision"] == "correct"
    assert status["review"]["corrected_fields"]["vendor"] == "Corrected Vendor Ltd"
    assert status["fields"]["vendor"] != "Corrected Vendor Ltd"  # the extractor's output, unchanged
