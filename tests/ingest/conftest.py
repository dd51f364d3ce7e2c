"""The ingest API's tier: real HTTP handling (Django's test client or pytest-django's live server) on
real PostgreSQL. Keys are made through ingest.keys, never by writing rows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from ingest.keys import create_api_key
from pipeline.extraction import synthetic

API = "/api/v1"


class ApiClient:
    """Django's test client with a bearer key and JSON bodies."""

    def __init__(self, raw_key: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {raw_key}"} if raw_key else {}

    def post(self, path: str, body: Any, **headers: str) -> Any:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.client.post(API + path, data=data, content_type=headers.pop("content_type", "application/json"),
                                headers={**self.headers, **headers})

    def get(self, path: str, **headers: str) -> Any:
        return self.client.get(API + path, headers={**self.headers, **headers})


@pytest.fixture
def acme_key(db) -> str:
    return create_api_key("acme", "billing-bot").raw


@pytest.fixture
def globex_key(db) -> str:
    return create_api_key("globex", "ap-bot").raw


@pytest.fixture
def acme(acme_key) -> ApiClient:
    return ApiClient(acme_key)


@pytest.fixture
def globex(globex_key) -> ApiClient:
    return ApiClient(globex_key)


def document(document_id: str = "INV-1", seed: int | str = 1, **extra: Any) -> dict[str, Any]:
    return {"document_id": document_id, "content": synthetic.valid(seed).text, **extra}


def assert_problem(response, status: int, field: str | None = None) -> dict[str, Any]:
    """``response`` is an RFC 9457 problem with ``status`` (naming ``field`` when given)."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["type"].startswith("urn:relayops:problem:")
    assert body["title"] and body["detail"]
    if field is not None:
        assert field in [error["field"] for error in body.get("errors", [])], body
    return body
