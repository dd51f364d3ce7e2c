"""HTTPS endpoints: the POST connects to the checked address, while the certificate is verified for the
URL's host name (TLS server name) and the Host header keeps it; a certificate for another name fails."""

from __future__ import annotations

import ssl

import pytest
import trustme
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from pipeline import queue
from pipeline.events import Event, PublishError
from pipeline.models import OutboxEvent
from pipeline.worker import process_once
from tests.conftest import invoice
from webhooks import services, signing, targets
from webhooks.publisher import WebhookPublisher

pytestmark = pytest.mark.django_db


def event() -> Event:
    """A committed job's outbox event, as the relay hands it to the publishers."""
    job, _ = queue.enqueue("acme", "doc-1", 1, invoice(1))
    assert process_once("w-test").job_id == job.pk
    row = OutboxEvent.objects.get(idempotency_key=job.idempotency_key)
    return Event(event_id=row.event_id, tenant=row.tenant, topic=row.topic, idempotency_key=row.idempotency_key,
                 payload=row.payload, created_at=row.created_at)


@pytest.fixture
def tls():
    ca = trustme.CA()
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    return ca, client_context


def serve(ca: trustme.CA, name: str, address: str) -> HTTPServer:
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(name).configure_cert(server_context)
    server = HTTPServer(host=address, port=0, ssl_context=server_context)
    server.start()
    return server


def test_an_https_endpoint_gets_the_event_signed_with_its_name_verified(tls):
    ca, client_context = tls
    address = str(targets.check("https://localhost/").address)
    server = serve(ca, "localhost", address)
    try:
        seen: list[Request] = []

        def handler(request: Request) -> Response:
            seen.append(request)
            return Response("ok", status=204)

        server.expect_request("/hook", method="POST").respond_with_handler(handler)
        made = services.create_endpoint("acme", f"https://localhost:{server.port}/hook?token=t", ["extraction.completed"])
        sent = event()
        WebhookPublisher(verify=client_context).publish(sent)
        [request] = seen
        assert request.headers["Host"] == f"localhost:{server.port}" and request.args["token"] == "t"
        assert request.headers[signing.EVENT_ID_HEADER] == str(sent.event_id)
        timestamp = int(request.headers[signing.TIMESTAMP_HEADER])
        assert request.headers[signing.SIGNATURE_HEADER] == signing.signature_header(made.secret, timestamp, request.data)
    finally:
        server.clear()
        server.stop()


def test_a_certificate_for_another_name_is_a_failed_delivery(tls):
    ca, client_context = tls
    address = str(targets.check("https://localhost/").address)
    server = serve(ca, "somewhere-else.example", address)
    try:
        services.create_endpoint("acme", f"https://localhost:{server.port}/hook", ["extraction.completed"])
        with pytest.raises(PublishError) as failed:
            WebhookPublisher(verify=client_context).publish(event())
        assert (failed.value.code, failed.value.status) == ("connection", None) and server.log == []
    finally:
        server.clear()
        server.stop()
