"""One POST of one event to one endpoint, signed, with a timeout. Only the status code is kept: the
response body is never read, stored or logged, and neither is the URL's query string or the secret."""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from pipeline.events import Event
from webhooks import signing, targets
from webhooks.errors import SecretUnreadableError, TargetRefusedError, UnresolvableHostError
from webhooks.models import WebhookEndpoint
from webhooks.secrets import decrypt

USER_AGENT = "RelayOps-Webhooks/1"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status: int | None  # the HTTP status answered, if any
    code: str  # "delivered", "http_status", "timeout", "connection", "dns", "refused_target", "secret_unreadable"


def body_of(event: Event) -> bytes:
    """The JSON document POSTed: the event's id, topic, tenant, creation time and payload."""
    return json.dumps({
        "id": str(event.event_id), "topic": event.topic, "tenant": event.tenant,
        "created_at": event.created_at.isoformat(), "data": event.payload,
    }, sort_keys=True, separators=(",", ":")).encode()


def _pinned_url(url: str, target: targets.Target) -> str:
    """``url`` with its host replaced by the checked address (the Host header and SNI keep the name)."""
    parts = urlsplit(url)
    host = f"[{target.address}]" if target.address.version == 6 else str(target.address)
    return urlunsplit((parts.scheme, f"{host}:{target.port}", parts.path or "/", parts.query, ""))


def _host_header(target: targets.Target) -> str:
    default = 443 if target.scheme == "https" else 80
    name = f"[{target.host}]" if ":" in target.host else target.host
    return name if target.port == default else f"{name}:{target.port}"


def post(client: httpx.Client, endpoint: WebhookEndpoint, event: Event, *, timestamp: int,
         policy: targets.Policy | None = None) -> Outcome:
    """POST ``event`` to ``endpoint``; never raises for the endpoint's or the network's faults."""
    try:
        target = targets.check(endpoint.url, policy)
        secret = decrypt(endpoint.secret_encrypted)
    except UnresolvableHostError:
        return Outcome(ok=False, status=None, code="dns")
    except TargetRefusedError:
        return Outcome(ok=False, status=None, code="refused_target")
    except SecretUnreadableError:
        return Outcome(ok=False, status=None, code="secret_unreadable")
    body = body_of(event)
    headers = {
        "Content-Type": "application/json", "User-Agent": USER_AGENT, "Host": _host_header(target),
        signing.EVENT_ID_HEADER: str(event.event_id), signing.TOPIC_HEADER: event.topic,
        signing.TIMESTAMP_HEADER: str(timestamp),
        signing.SIGNATURE_HEADER: signing.signature_header(secret, timestamp, body),
    }
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    request = client.build_request("POST", _pinned_url(endpoint.url, target), content=body, headers=headers,
                                   extensions=extensions)
    try:
        response = client.send(request, stream=True)  # the body is never read
    except httpx.TimeoutException:
        return Outcome(ok=False, status=None, code="timeout")
    except (httpx.NetworkError, httpx.RemoteProtocolError):
        return Outcome(ok=False, status=None, code="connection")
    except httpx.HTTPError:
        return Outcome(ok=False, status=None, code="http_error")
    try:
        status = response.status_code
    finally:
        response.close()
    if 200 <= status < 300:
        return Outcome(ok=True, status=status, code="delivered")
    return Outcome(ok=False, status=status, code="http_status")
