"""Concurrent identical POSTs create exactly one job: real HTTP requests from threads released together,
against pytest-django's live server (a threaded WSGI server on loopback) and real PostgreSQL."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ingest.keys import create_api_key
from pipeline.models import Job
from tests.ingest.conftest import document

CLIENTS = 8


def post_together(url: str, key: str, bodies: list[dict]) -> list[httpx.Response]:
    """Each body POSTed from its own thread and connection, all released by one barrier."""
    barrier = threading.Barrier(len(bodies))

    def post(body: dict) -> httpx.Response:
        with httpx.Client(timeout=30) as client:
            client.get(f"{url}/api/v1/openapi.json")  # connect first, so the barrier releases the requests only
            barrier.wait(timeout=30)
            return client.post(f"{url}/api/v1/documents", json=body, headers={"Authorization": f"Bearer {key}"})

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, bodies))


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_identical_posts_create_exactly_one_job(live_server, round_):
    key = create_api_key("acme", f"bot-{round_}").raw
    body = document(f"INV-{round_}", seed=round_)
    responses = post_together(live_server.url, key, [body] * CLIENTS)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * (CLIENTS - 1) + [201], [r.text for r in responses]
    assert Job.objects.filter(document_id=f"INV-{round_}").count() == 1
    assert {r.json()["job_id"] for r in responses} == {Job.objects.get(document_id=f"INV-{round_}").pk}


def test_concurrent_posts_of_one_key_with_different_content_create_one_job_and_conflict_the_rest(live_server):
    key = create_api_key("acme", "bot").raw
    bodies = [document("INV-X", seed=n) for n in range(CLIENTS)]
    responses = post_together(live_server.url, key, bodies)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [409] * (CLIENTS - 1), [r.text for r in responses]
    job = Job.objects.get(document_id="INV-X")
    winner = next(body for body, r in zip(bodies, responses) if r.status_code == 201)
    assert job.payload["text"] == winner["content"]
    assert all(r.json()["idempotency_key"] == "acme:INV-X:v1" for r in responses if r.status_code == 409)
