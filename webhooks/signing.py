"""How a delivery is signed: ``RelayOps-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>``, computed with
the endpoint's secret over ``<t>.<body>`` (the timestamp, a dot, the exact body bytes). A receiver
recomputes it and compares in constant time (docs/webhooks.md has a ten-line example)."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "RelayOps-Signature"
EVENT_ID_HEADER = "RelayOps-Event-Id"
TOPIC_HEADER = "RelayOps-Topic"
TIMESTAMP_HEADER = "RelayOps-Timestamp"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"
