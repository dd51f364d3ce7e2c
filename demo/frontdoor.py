"""The demo's front door: API keys for the demo tenants, a server for the API, the documents POSTed
through it over HTTP, and a ``curl`` line that ingests one more."""

from __future__ import annotations

import json
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application

from demo.scenarios import TENANTS, DemoInvoice
from ingest.keys import create_api_key, revoke_api_key
from ingest.models import ApiKey

KEY_NAME = "demo"


@dataclass(frozen=True)
class Posted:
    item: DemoInvoice
    status: int
    job_id: int
    key: str  # the job's idempotency key


def fresh_keys() -> dict[str, str]:
    """A new key per demo tenant (keys are shown once, so each run revokes the last run's and makes new ones)."""
    for key_id in ApiKey.objects.filter(tenant__in=TENANTS, name=KEY_NAME, revoked_at__isnull=True).values_list(
            "pk", flat=True):
        revoke_api_key(key_id, by="relayops_demo")
    return {tenant: create_api_key(tenant, KEY_NAME, created_by="relayops_demo").raw for tenant in TENANTS}


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the demo prints its own lines
        pass


@contextmanager
def local_server() -> Iterator[str]:
    """This process serves the API on an ephemeral loopback port while the block runs; yields its URL."""
    server = ThreadedWSGIServer(("127.0.0.1", 0), _QuietHandler, allow_reuse_address=False)
    server.set_app(get_wsgi_application())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def wait_until_serving(url: str, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Until ``url`` serves the API's schema; RuntimeError if ``server`` exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode} (is the port taken?)")
        try:
            if httpx.get(f"{url}/api/v1/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server did not answer at {url} within {timeout:.0f} s")


def body(item: DemoInvoice) -> dict[str, object]:
    return {"document_id": item.document_id, "content": item.text}


def post_all(base_url: str, keys: dict[str, str], items: list[DemoInvoice]) -> list[Posted]:
    """POST each document with its tenant's key; any answer but 200/201 stops the demo."""
    posted = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for item in items:
            response = client.post("/api/v1/documents", json=body(item),
                                   headers={"Authorization": f"Bearer {keys[item.tenant]}"})
            if response.status_code not in (200, 201):
                raise RuntimeError(f"POST {item.document_id}: HTTP {response.status_code} {response.text}")
            answer = response.json()
            posted.append(Posted(item, response.status_code, answer["job_id"], answer["idempotency_key"]))
    return posted


def curl_line(base_url: str, key: str, item: DemoInvoice) -> str:
    """A shell line that POSTs ``item`` (run it twice: the second answers 200 with the same job)."""
    return (f"curl -sS {base_url}/api/v1/documents -H {shlex.quote(f'Authorization: Bearer {key}')} "
            f"-H 'Content-Type: application/json' -d {shlex.quote(json.dumps(body(item)))}")
