"""The promise, checked from the rows alone: what ``check_invariants`` asks of a database.

Each check is one read-only query selecting the ids that break it; the report counts them and shows
a few. They run in one REPEATABLE READ, READ ONLY transaction (one snapshot: a job that commits
between two checks cannot look half done) under a ``statement_timeout``, so an operator can run them
against production while the cluster works. They hold at every instant, not only when the cluster
is idle: a result, its event and the completion commit together, and a review is written before its
event is marked published.

Rows the retention windows prune are allowed for: a succeeded job whose published event was pruned
shows its event through the review the consumer wrote for it.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from pipeline.consumer import REVIEW_CONSUMER
from pipeline.outbox import RESULT_TOPIC
from pipeline.reasons import DeadLetterReason, ErrorCode
from pipeline.states import LIVE_STATUSES, TERMINAL_STATUSES

SAMPLE = 5  # ids shown per broken check


def _in(values: Any) -> str:
    return ", ".join(f"'{value}'" for value in values)  # our own enum values, never input


@dataclass(frozen=True)
class Check:
    name: str
    promise: str
    sql: str  # selects one id column ("id") of the rows that break it; {scope} limits the jobs (alias j)


CHECKS = (
    Check("jobs_live_or_terminal", "every job is live or terminal, consistently, within its budgets", f"""
        SELECT j.id FROM pipeline_job j WHERE {{scope}} AND NOT (
            (j.status IN ({_in(LIVE_STATUSES)}) AND j.finished_at IS NULL
             OR j.status IN ({_in(TERMINAL_STATUSES)}) AND j.finished_at IS NOT NULL)
            AND (j.status <> 'leased' OR j.lease_until IS NOT NULL AND j.lease_owner <> '')
            AND j.attempt <= j.max_attempts AND j.lease_expiries <= j.max_lease_expiries)"""),
    Check("succeeded_has_its_result", "every succeeded job has its result, written at its final fence", """
        SELECT j.id FROM pipeline_job j WHERE {scope} AND j.status = 'succeeded' AND NOT EXISTS (
            SELECT 1 FROM pipeline_result r
            WHERE r.job_id = j.id AND r.fence = j.fence AND r.idempotency_key = j.idempotency_key)"""),
    Check("result_only_for_success", "no result without its succeeded job, at the job's final fence", """
        SELECT r.id FROM pipeline_result r JOIN pipeline_job j ON j.id = r.job_id
        WHERE {scope} AND (j.status <> 'succeeded' OR r.fence <> j.fence OR r.idempotency_key <> j.idempotency_key)"""),
    Check("succeeded_has_its_event", "every succeeded job has its outbox event (or, once pruned, its review)", """
        SELECT j.id FROM pipeline_job j WHERE {scope} AND j.status = 'succeeded'
          AND NOT EXISTS (SELECT 1 FROM pipeline_outboxevent o WHERE o.idempotency_key = j.idempotency_key)
          AND NOT EXISTS (SELECT 1 FROM pipeline_review v WHERE v.idempotency_key = j.idempotency_key)"""),
    Check("event_only_for_success", "no outbox event without a succeeded job of its key", """
        SELECT o.id FROM pipeline_outboxevent o JOIN pipeline_job j ON j.idempotency_key = o.idempotency_key
        WHERE {scope} AND j.status <> 'succeeded'"""),
    Check("published_event_consumed_once", "every published result event was consumed, into its one review", f"""
        SELECT o.id FROM pipeline_outboxevent o JOIN pipeline_job j ON j.idempotency_key = o.idempotency_key
        LEFT JOIN pipeline_consumedevent c ON c.consumer = '{REVIEW_CONSUMER}' AND c.event_id = o.event_id
        LEFT JOIN pipeline_review v ON v.event_id = o.event_id AND v.idempotency_key = o.idempotency_key
        WHERE {{scope}} AND o.topic = '{RESULT_TOPIC}' AND o.published_at IS NOT NULL
          AND (c.id IS NULL OR v.id IS NULL)"""),
    Check("review_only_for_success", "no review without its succeeded job and that job's event", f"""
        SELECT v.id FROM pipeline_review v JOIN pipeline_job j ON j.id = v.job_id
        LEFT JOIN pipeline_outboxevent o ON o.topic = '{RESULT_TOPIC}' AND o.idempotency_key = v.idempotency_key
        WHERE {{scope}} AND (j.status <> 'succeeded' OR v.idempotency_key <> j.idempotency_key
                             OR o.id IS NOT NULL AND o.event_id <> v.event_id)"""),
    Check("fences_contiguous", "fences run from 1 to the job's fence, one attempt row each", """
        SELECT j.id FROM pipeline_job j LEFT JOIN (
            SELECT a.job_id, COUNT(*) AS n, MIN(a.fence) AS lo, MAX(a.fence) AS hi
            FROM pipeline_attempt a GROUP BY a.job_id) a ON a.job_id = j.id
        WHERE {scope} AND (COALESCE(a.n, 0) <> j.fence OR j.fence > 0 AND (a.lo <> 1 OR a.hi <> j.fence))"""),
    Check("attempts_closed", "only a leased job's current lease is open; every other attempt is closed", """
        SELECT a.id FROM pipeline_attempt a JOIN pipeline_job j ON j.id = a.job_id
        WHERE {scope} AND (a.ended_at IS NULL) <> (j.status = 'leased' AND a.fence = j.fence)"""),
    Check("dead_letters_closed_codes", "dead letters exactly for dead-lettered jobs, with closed codes only", f"""
        SELECT j.id FROM pipeline_job j LEFT JOIN pipeline_deadletter d ON d.job_id = j.id
        WHERE {{scope}} AND ((j.status = 'dead_lettered') <> (d.id IS NOT NULL)
            OR d.id IS NOT NULL AND (d.reason_code NOT IN ({_in(DeadLetterReason.values)})
                                     OR d.error_code NOT IN ({_in(ErrorCode.values)}, '')))"""),
)

# At most one result, event and review per key, and one consumption per event, hold by construction:
# these unique indexes refuse a second row. The checker proves they are in place.
UNIQUE_INDEXES: dict[str, set[tuple[str, ...]]] = {
    "pipeline_result": {("idempotency_key",), ("job_id",)},
    "pipeline_outboxevent": {("topic", "idempotency_key"), ("event_id",)},
    "pipeline_review": {("idempotency_key",), ("event_id",)},
    "pipeline_consumedevent": {("consumer", "event_id")},
}


@dataclass(frozen=True)
class Finding:
    check: str
    promise: str
    broken: int
    sample: list[int]
    seconds: float


def _scope(tenant: str | None, since: dt.datetime | None) -> tuple[str, dict[str, Any]]:
    clauses: list[str] = ["1 = 1"]
    params: dict[str, Any] = {}
    if tenant is not None:
        clauses.append("j.tenant = %(tenant)s")
        params["tenant"] = tenant
    if since is not None:
        clauses.append("j.created_at >= %(since)s")
        params["since"] = connection.ops.adapt_datetimefield_value(since)
    return " AND ".join(clauses), params


def _run(check: Check, scope: str, params: dict[str, Any]) -> Finding:
    began = time.monotonic()
    query = check.sql.format(scope=scope)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({query}) v", params)
        (broken,) = cursor.fetchone()
        sample: list[int] = []
        if broken:
            cursor.execute(f"SELECT id FROM ({query}) v ORDER BY id LIMIT {SAMPLE}", params)
            sample = [row[0] for row in cursor.fetchall()]
    return Finding(check.name, check.promise, broken, sample, time.monotonic() - began)


def _unique_indexes() -> Finding:
    began = time.monotonic()
    missing = [f"{table}({', '.join(columns)})" for table, wanted in UNIQUE_INDEXES.items()
               for columns in wanted - _unique_columns(table)]
    return Finding("at_most_one_per_key", "unique indexes refuse a second result, event, review or consumption"
                   + (f"; missing: {', '.join(missing)}" if missing else ""), len(missing), [], time.monotonic() - began)


def _unique_columns(table: str) -> set[tuple[str, ...]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {tuple(c["columns"]) for c in constraints.values() if c["unique"] and not c.get("primary_key")}


@dataclass(frozen=True)
class Report:
    jobs: int  # jobs in scope
    findings: list[Finding]
    seconds: float

    @property
    def holds(self) -> bool:
        return not any(finding.broken for finding in self.findings)


def check_all(*, tenant: str | None = None, since: dt.datetime | None = None,
              statement_timeout_seconds: float = 60.0) -> Report:
    """Every invariant, on one read-only snapshot; each finding counts the rows that break it."""
    began = time.monotonic()
    scope, params = _scope(tenant, since)
    own_transaction = not connection.in_atomic_block  # a caller's open transaction keeps its own snapshot
    with transaction.atomic():
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                if own_transaction:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cursor.execute("SELECT set_config('statement_timeout', %s, true)",
                               [str(int(statement_timeout_seconds * 1000))])
            cursor.execute(f"SELECT COUNT(*) FROM pipeline_job j WHERE {scope}", params)
            (jobs,) = cursor.fetchone()
        findings = [_unique_indexes()] + [_run(check, scope, params) for check in CHECKS]
        transaction.set_rollback(True)  # nothing to keep: it only read
    return Report(jobs, findings, time.monotonic() - began)
