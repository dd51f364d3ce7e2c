"""The relay's claim reads through its two partial indexes: a backlog of events still backing off (a
dead endpoint) is never scanned, and the claim takes fresh events and those whose backoff ended."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from django.db import connection

from pipeline import relay, sql
from pipeline.models import MAX_PUBLISH_ATTEMPTS, OutboxEvent

pytestmark = pytest.mark.django_db


def event(n: int, now: dt.datetime, **fields) -> OutboxEvent:
    return OutboxEvent(event_id=uuid.uuid4(), tenant="acme", topic="extraction.completed",
                       idempotency_key=f"acme:doc-{n}:v1", payload={"job_id": n}, created_at=now, **fields)


def plan_nodes(plan: dict) -> list[dict]:
    return [plan, *[node for child in plan.get("Plans", []) for node in plan_nodes(child)]]


def test_a_backlog_backing_off_is_not_read_by_the_claim(clock):
    now = clock.now()
    later = now + dt.timedelta(hours=1)
    OutboxEvent.objects.bulk_create([event(n, now, failures=3, next_attempt_at=later) for n in range(20_000)])
    OutboxEvent.objects.bulk_create([
        event(20_001, now), event(20_002, now, failures=1, next_attempt_at=now - dt.timedelta(seconds=1)),
        event(20_003, now, failures=10, parked_at=now, next_attempt_at=later),
    ])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pipeline_outboxevent")
        params = {"token": uuid.uuid4(), "now": now, "claimed_until": now + dt.timedelta(seconds=30),
                  "limit": 100, "max_attempts": MAX_PUBLISH_ATTEMPTS}
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql.CLAIM_EVENTS.format(skip_locked=sql.skip_locked(), facts=""),
                       params)
        (raw,) = cursor.fetchone()
    document = raw if isinstance(raw, list) else json.loads(raw)
    scans = [node for node in plan_nodes(document[0]["Plan"]) if node.get("Relation Name") == "pipeline_outboxevent"]
    used = {node.get("Index Name") for node in scans}
    assert {"outbox_fresh", "outbox_backoff"} <= used and all(n["Node Type"] != "Seq Scan" for n in scans), used
    assert sum(node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0) for node in scans
               if node.get("Index Name") in ("outbox_fresh", "outbox_backoff")) <= 2
    claimed = OutboxEvent.objects.filter(claim_token__isnull=False).values_list("idempotency_key", flat=True)
    assert sorted(claimed) == ["acme:doc-20001:v1", "acme:doc-20002:v1"]
    assert relay.publish_pending(clock=clock).claimed == 0  # the rest backs off or is parked
