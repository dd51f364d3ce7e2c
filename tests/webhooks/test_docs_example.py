"""The receiver's verification example in docs/webhooks.md, run against RelayOps' own signatures."""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from pathlib import Path

from pipeline.events import Event
from webhooks import delivery, signing

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"


def documented_verify():
    [code] = [block for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if "def verify" in block]
    assert len(code.strip().splitlines()) <= 10  # the promised ten lines
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace["verify"]


def test_the_documented_example_accepts_a_real_signature_and_refuses_the_rest():
    verify = documented_verify()
    event = Event(event_id=uuid.uuid4(), tenant="acme", topic="extraction.completed", idempotency_key="acme:d:v1",
                  payload={"document_id": "d"}, created_at=dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc))
    body, secret, now = delivery.body_of(event), "whsec_the-endpoints-secret", int(time.time())
    header = signing.signature_header(secret, now, body)
    assert verify(secret, header, body)
    assert not verify("whsec_another-secret", header, body)  # a wrong secret
    assert not verify(secret, header, body.replace(b"acme", b"evil"))  # a changed body
    assert not verify(secret, signing.signature_header(secret, now - 3600, body), body)  # an old replay
    assert not verify(secret, "garbage", body)
