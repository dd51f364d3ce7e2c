"""Admin list pages over a million jobs: wall time, queries and the slowest statement's plan per page.

Usage: ./run bench admin_lists [--jobs 1000000] [--repeats 10] [--db relayops_bench_admin]
Creates the benchmark database on the DATABASE_URL server, seeds it with set-based SQL (``--jobs``
finished jobs over six tenants of very different sizes, their results, dead letters, recent outbox
events, a few thousand reviews and audit entries, a live backlog), then logs in a superuser and an
operator of the smallest and of the largest tenant with Django's test client and times every admin
changelist and some filtered, searched and second-page variants. Per page it prints the median and
p95 (nearest rank) of ``--repeats`` requests after a warm-up, the queries of one more request,
whether one of them is an exact COUNT(*) over a whole big table, the slowest statement, and its plan
(EXPLAIN ANALYZE), so a sequential scan over a million rows shows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from benchdb import fresh_database  # bench/ is on sys.path when run as a script

# Tenant shares per 200 consecutive job ids: tenants interleave, as they do in a shared queue.
TENANTS = {"acme": 80, "globex": 50, "initech": 30, "umbrella": 20, "hooli": 19, "wonka": 1}
BUCKETS = sum(TENANTS.values())
LARGE, SMALL = "acme", "wonka"
SPAN = dt.timedelta(days=35)  # finished jobs are spread over this; outbox rows live 7 days, a fifth
OUTBOX_DAYS = 7
BACKLOG, LEASED, PENDING_EVENTS = 2000, 20, 100
BIG_TABLES = ("pipeline_job", "pipeline_result", "pipeline_outboxevent", "pipeline_deadletter")
SLOW_MS = 300.0
WIDE_SCAN = 100_000  # rows a plan node reads, over which its plan is marked
JOB_COLUMNS = """tenant, document_id, operation_version, idempotency_key, payload, payload_hash, status, attempt,
    max_attempts, created_at, visible_at, lease_until, leased_at, deadline_at, lease_owner, fence,
    last_error_code, finished_at, reprocessed_from_id"""


def _tenant_of(column: str) -> str:
    """A CASE giving each id its tenant by share: every run of 200 ids holds all six tenants."""
    cases, upper = [], 0
    for name, share in TENANTS.items():
        upper += share
        cases.append(f"WHEN mod({column}, {BUCKETS}) < {upper} THEN '{name}'")
    return f"CASE {' '.join(cases)} END"


# Finished first versions, oldest first (ids grow with created_at). A hash of the id, not the id's
# bucket, picks the outcome, so every tenant gets all three: 90% succeeded, 5% dead-lettered (3 in 5
# at once for a malformed document, the rest after three timeouts), 5% cancelled past their deadline.
FINISHED_JOBS = f"""
WITH n AS (
    SELECT g, 'doc-' || g AS doc, {_tenant_of('g')} AS tenant, mod(abs(hashint4(g)::bigint), 1000) AS h,
           %(now)s::timestamptz - (%(jobs)s - g) * %(step)s::interval - interval '15 minutes' AS created
    FROM generate_series(1, %(jobs)s) AS g
)
INSERT INTO pipeline_job ({JOB_COLUMNS})
SELECT tenant, doc, 1, tenant || ':' || doc || ':v1',
       jsonb_build_object('text', 'INVOICE NO: INV-' || g || E'\\nDATE: 2026-02-14\\nTOTAL: 12.50 EUR'),
       md5(tenant || doc) || md5(doc),
       CASE WHEN h < 900 THEN 'succeeded' WHEN h < 950 THEN 'dead_lettered' ELSE 'cancelled' END,
       CASE WHEN h < 860 THEN 1 WHEN h < 900 THEN 2 WHEN h < 930 THEN 1 WHEN h < 950 THEN 3 ELSE 0 END,
       3, created, created, NULL,
       CASE WHEN h < 950 THEN created + interval '1 second' END, created + interval '1 day',
       CASE WHEN h < 950 THEN 'node-' || mod(g, 3) || ':' || (1000 + mod(g, 7)) ELSE '' END,
       CASE WHEN h < 860 THEN 1 WHEN h < 900 THEN 2 WHEN h < 930 THEN 1 WHEN h < 950 THEN 3 ELSE 0 END,
       CASE WHEN h < 900 THEN '' WHEN h < 930 THEN 'document_malformed' WHEN h < 950 THEN 'extractor_timeout'
            ELSE 'deadline_exceeded' END,
       created + interval '2 seconds', NULL
FROM n ORDER BY g
"""

DEAD_LETTERS = """
INSERT INTO pipeline_deadletter (job_id, tenant, reason_code, error_code, attempts, created_at)
SELECT id, tenant,
       CASE WHEN last_error_code = 'document_malformed' THEN 'permanent_error' ELSE 'max_attempts_exceeded' END,
       last_error_code, attempt, finished_at
FROM pipeline_job WHERE status = 'dead_lettered' ORDER BY id
"""

# One dead letter in 16 was reprocessed: its second version succeeded, and the audit says who and why.
REPROCESSED_JOBS = f"""
INSERT INTO pipeline_job ({JOB_COLUMNS})
SELECT tenant, document_id, 2, tenant || ':' || document_id || ':v2', payload, payload_hash, 'succeeded', 1, 3,
       finished_at + interval '5 minutes', finished_at + interval '5 minutes', NULL,
       finished_at + interval '301 seconds', finished_at + interval '1 day 5 minutes', lease_owner, 1, '',
       finished_at + interval '302 seconds', id
FROM pipeline_job WHERE status = 'dead_lettered' AND mod(id, 16) = 0 ORDER BY id
"""

AUDIT_ENTRIES = """
INSERT INTO dlq_auditentry (at, action, tenant, operator, operator_user_id, reason, dead_letter_id, old_job_id,
                            new_job_id)
SELECT nj.created_at, 'reprocess', nj.tenant, 'op-' || nj.tenant, NULL, 'the vendor re-sent a readable copy',
       d.id, d.job_id, nj.id
FROM pipeline_job nj JOIN pipeline_deadletter d ON d.job_id = nj.reprocessed_from_id ORDER BY nj.created_at
"""

REFUSALS = """
INSERT INTO dlq_reprocessrefusal (at, tenant, operator, dead_letter_id, retry_after_seconds)
SELECT created_at + interval '10 minutes', tenant, 'op-' || tenant, id, 1800
FROM pipeline_deadletter WHERE mod(id, 100) = 7 ORDER BY id
"""

RESULTS = """
INSERT INTO pipeline_result (job_id, tenant, idempotency_key, payload_hash, data, fence, created_at)
SELECT id, tenant, idempotency_key, payload_hash,
       jsonb_build_object('invoice_number', 'INV-' || id, 'issue_date', '2026-02-14', 'vendor', 'Globex',
                          'total', '12.50', 'currency', 'EUR'),
       fence, finished_at
FROM pipeline_job WHERE status = 'succeeded' ORDER BY finished_at, id
"""

# Published rows are pruned after seven days, so only the last week's results still have events;
# the newest few are not published yet.
OUTBOX_EVENTS = f"""
INSERT INTO pipeline_outboxevent (event_id, tenant, topic, idempotency_key, payload, created_at, published_at,
                                  publish_attempts, claim_token, claimed_until)
SELECT gen_random_uuid(), r.tenant, 'extraction.completed', r.idempotency_key,
       jsonb_build_object('idempotency_key', r.idempotency_key, 'result_id', r.id), r.created_at,
       CASE WHEN r.id <= newest.id - {PENDING_EVENTS} THEN r.created_at + interval '50 milliseconds' END,
       CASE WHEN r.id <= newest.id - {PENDING_EVENTS} THEN 1 ELSE 0 END, NULL, NULL
FROM pipeline_result r, (SELECT max(id) AS id FROM pipeline_result) AS newest
WHERE r.created_at > %(now)s::timestamptz - interval '{OUTBOX_DAYS} days' ORDER BY r.id
"""

# One published event in 40 reached a reviewer: decided after three hours, pending for the last day.
REVIEWS = """
INSERT INTO pipeline_review (tenant, document_id, idempotency_key, event_id, job_id, status, created_at,
                             decided_at, decided_by_id)
SELECT e.tenant, j.document_id, e.idempotency_key, e.event_id, j.id,
       CASE WHEN pending THEN 'pending' WHEN mod(e.id, 400) = 0 THEN 'rejected' ELSE 'approved' END,
       e.published_at,
       CASE WHEN NOT pending THEN e.published_at + interval '3 hours' END,
       CASE WHEN NOT pending THEN %(decider)s::bigint END
FROM pipeline_outboxevent e JOIN pipeline_job j ON j.idempotency_key = e.idempotency_key,
     LATERAL (SELECT e.published_at > %(now)s::timestamptz - interval '1 day' AS pending) AS p
WHERE e.published_at IS NOT NULL AND mod(e.id, 40) = 0 ORDER BY e.id
"""

# The live queue: a backlog from the last ten minutes, its oldest jobs leased right now.
BACKLOG_JOBS = f"""
WITH n AS (
    SELECT g, 'live-' || g AS doc, {_tenant_of('g')} AS tenant, g <= {LEASED} AS leased,
           %(now)s::timestamptz - interval '10 minutes' * ({BACKLOG} - g) / {BACKLOG} AS created
    FROM generate_series(1, {BACKLOG}) AS g
)
INSERT INTO pipeline_job ({JOB_COLUMNS})
SELECT tenant, doc, 1, tenant || ':' || doc || ':v1', jsonb_build_object('text', 'INVOICE NO: LIVE-' || g),
       md5(tenant || doc) || md5(doc), CASE WHEN leased THEN 'leased' ELSE 'queued' END,
       CASE WHEN leased THEN 1 ELSE 0 END, 3, created,
       CASE WHEN leased THEN %(now)s::timestamptz + interval '30 seconds' ELSE created END,
       CASE WHEN leased THEN %(now)s::timestamptz + interval '30 seconds' END,
       CASE WHEN leased THEN %(now)s::timestamptz END, created + interval '1 day',
       CASE WHEN leased THEN 'node-1:1001' ELSE '' END, CASE WHEN leased THEN 1 ELSE 0 END, '', NULL, NULL
FROM n ORDER BY g
"""

# Every NOT NULL text column of our tables without a default gets '' (Django's blank default).
BLANK_DEFAULTS = r"""
DO $$ DECLARE c record; BEGIN
    FOR c IN SELECT table_name, column_name FROM information_schema.columns
             WHERE table_schema = 'public' AND (table_name LIKE 'pipeline\_%' OR table_name LIKE 'dlq\_%')
               AND is_nullable = 'NO' AND column_default IS NULL AND data_type = 'character varying'
    LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET DEFAULT %L', c.table_name, c.column_name, '');
    END LOOP;
END $$
"""

SEED = [
    ("finished jobs", FINISHED_JOBS), ("dead letters", DEAD_LETTERS), ("reprocessed jobs", REPROCESSED_JOBS),
    ("audit entries", AUDIT_ENTRIES), ("reprocess refusals", REFUSALS), ("results", RESULTS),
    ("outbox events", OUTBOX_EVENTS), ("reviews", REVIEWS), ("live backlog", BACKLOG_JOBS),
]


def _setup(db: str) -> None:
    """A fresh, migrated database and Django as production runs it (DEBUG off), plus the test client's host."""
    hosts = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
    fresh_database(db, DEBUG="0", ALLOWED_HOSTS=f"{hosts},testserver")


def _users() -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tenancy.services import create_member

    return {
        "superuser": get_user_model().objects.create_superuser("root", password="bench-bench-bench"),
        f"op {SMALL}": create_member(f"op-{SMALL}", [SMALL]).user,
        f"op {LARGE}": create_member(f"op-{LARGE}", [LARGE]).user,
    }


def _seed(jobs: int, decider_id: int) -> None:
    from django.db import connection

    now = dt.datetime.now(dt.timezone.utc)
    params: dict[str, Any] = {"now": now, "jobs": jobs, "step": SPAN / jobs, "decider": decider_id}
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")  # a throwaway database: no need to wait for the WAL
        # Columns added after this seed was written have Django-side defaults only: give the throwaway
        # database the same ones, so the seed's INSERTs need not name them.
        cursor.execute("ALTER TABLE pipeline_job ALTER COLUMN lease_expiries SET DEFAULT 0, "
                       "ALTER COLUMN max_lease_expiries SET DEFAULT 10")
        cursor.execute(BLANK_DEFAULTS)
        for label, statement in SEED:
            began = time.perf_counter()
            cursor.execute(statement, params)
            print(f"  {label:<20} {cursor.rowcount:>10,} rows {time.perf_counter() - began:7.1f} s", flush=True)
        began = time.perf_counter()
        cursor.execute("VACUUM ANALYZE")
        print(f"  {'VACUUM ANALYZE':<20} {'':>15} {time.perf_counter() - began:7.1f} s", flush=True)
    print(f"seeded in {time.perf_counter() - started:.0f} s")


@dataclass(frozen=True)
class Page:
    model: str  # app_model, as in the admin's URL names
    who: str
    params: dict[str, str]

    @property
    def label(self) -> str:
        name = self.model.split("_", 1)[1]
        return f"{name} ?{urlencode(self.params)}" if self.params else name


@dataclass
class Measurement:
    page: Page
    status: int
    median_ms: float
    p95_ms: float
    queries: int
    full_counts: list[str]
    shown: str  # the paginator's "about N jobs" / "N jobs"
    slowest_ms: float
    slowest_sql: str


def _samples() -> dict[str, str]:
    """Keys and ids that exist, to search for: each is the middle row of its kind."""
    from dlq.models import AuditEntry
    from pipeline.models import DeadLetter, OutboxEvent, Review

    def middle(rows: Any) -> Any:
        return rows.order_by("id")[rows.count() // 2]

    event = middle(OutboxEvent.objects.filter(tenant=SMALL, published_at__isnull=False))  # a key in every table
    dead = middle(DeadLetter.objects.filter(tenant=LARGE).select_related("job")).job
    small_doc = event.idempotency_key.split(":")[1]
    return {"small_key": event.idempotency_key, "small_doc": small_doc,
            "small_prefix": small_doc[:-1],  # "doc-12345" finds doc-1234x: about ten documents
            "review_doc": middle(Review.objects.all()).document_id,
            "dead_key": dead.idempotency_key, "dead_doc": dead.document_id, "dead_prefix": dead.document_id[:-2],
            "audit_key": middle(AuditEntry.objects.select_related("old_job")).old_job.idempotency_key}


def _pages(s: dict[str, str]) -> list[Page]:
    from django.utils import timezone

    root, small, large = "superuser", f"op {SMALL}", f"op {LARGE}"
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    past_week = {"at__gte": str(midnight - dt.timedelta(days=7)), "at__lt": str(midnight + dt.timedelta(days=1))}
    models = ["pipeline_job", "pipeline_result", "pipeline_outboxevent", "pipeline_review", "pipeline_deadletter",
              "dlq_auditentry", "dlq_reprocessrefusal"]
    pages = [Page(model, who, {}) for model in models for who in (root, small, large)]
    variants = {
        "pipeline_job": [
            (root, {"status__exact": "queued"}), (root, {"status__exact": "dead_lettered"}), (root, {"tenant": SMALL}),
            (root, {"tenant": LARGE, "status__exact": "cancelled"}), (root, {"age": "1d"}), (root, {"age": "old"}),
            (root, {"q": s["small_key"]}), (root, {"q": s["small_doc"]}), (root, {"q": f"{SMALL}:{s['small_doc']}"}),
            (root, {"q": s["small_prefix"]}), (root, {"q": f"{SMALL}:{s['small_prefix']}"}), (root, {"q": "doc-9"}),
            (root, {"p": "2"}), (small, {"status__exact": "dead_lettered"}), (small, {"age": "old"}),
            (small, {"q": s["small_key"]}), (small, {"q": s["small_prefix"]}), (small, {"q": "doc-9"}),
            (small, {"p": "2"}), (large, {"status__exact": "dead_lettered"}), (large, {"q": s["small_prefix"]}),
            (large, {"q": "doc-9"}), (large, {"age": "1d"}), (large, {"p": "2"}),
        ],
        "pipeline_result": [
            (root, {"tenant": SMALL}), (root, {"age": "1d"}), (root, {"age": "old"}), (root, {"q": s["small_key"]}),
            (root, {"p": "2"}), (small, {"age": "1d"}), (small, {"p": "2"}), (large, {"age": "7d"}),
        ],
        "pipeline_outboxevent": [
            (root, {"state": "pending"}), (root, {"state": "published"}), (root, {"tenant": SMALL}),
            (root, {"q": s["small_key"]}), (root, {"p": "2"}), (small, {"state": "pending"}), (large, {"p": "2"}),
        ],
        "pipeline_review": [
            (root, {"status__exact": "pending"}), (root, {"tenant": SMALL}), (root, {"age": "old"}),
            (root, {"q": s["review_doc"]}), (root, {"q": s["review_doc"][:-1]}), (root, {"p": "2"}),
            (small, {"status__exact": "pending"}), (large, {"q": "doc-9"}),
        ],
        "pipeline_deadletter": [
            (root, {"reason_code__exact": "permanent_error"}), (root, {"tenant": SMALL}), (root, {"age": "7d"}),
            (root, {"q": s["dead_key"]}), (root, {"q": s["dead_doc"]}), (root, {"q": s["dead_prefix"]}),
            (root, {"p": "2"}), (small, {"age": "old"}), (large, {"reason_code__exact": "max_attempts_exceeded"}),
            (large, {"q": s["dead_prefix"]}), (large, {"p": "2"}),
        ],
        "dlq_auditentry": [
            (root, {"operator": f"op-{LARGE}"}), (root, {"tenant": SMALL}), (root, past_week),
            (root, {"q": s["audit_key"]}), (root, {"p": "2"}), (large, {"p": "2"}),
        ],
        "dlq_reprocessrefusal": [(root, {"tenant": SMALL}), (root, past_week), (root, {"p": "2"})],
    }
    for model in models:
        pages += [Page(model, who, params) for who, params in variants[model]]
    return sorted(pages, key=lambda page: models.index(page.model))


def _full_count(sql: str) -> str | None:
    """The big table an exact, unfiltered, uncapped COUNT reads in full, if ``sql`` is one."""
    upper = sql.upper()
    if "COUNT(" not in upper or " WHERE " in upper or " LIMIT " in upper:
        return None
    return next((table for table in BIG_TABLES if f'FROM "{table}"' in sql), None)


def _shown(html: str) -> str:
    paginator = re.search(r'<p class="paginator">(.*?)</p>', html, re.S)
    text = " ".join(re.sub(r"<[^>]+>", " ", paginator.group(1)).split()) if paginator else ""
    found = re.search(r"(about )?(\d+) [a-z][a-z ]*?(?: Show all)?$", text)
    return ("~" if found.group(1) else "") + f"{int(found.group(2)):,}" if found else "?"


def _measure(client: Any, page: Page, repeats: int) -> Measurement:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    url = reverse(f"admin:{page.model}_changelist") + (f"?{urlencode(page.params)}" if page.params else "")
    client.get(url)  # warm-up: caches, the session, the first plan
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - began) * 1000)
    durations: list[float] = []  # the captured queries' own times are rounded to the millisecond

    def timed(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            durations.append((time.perf_counter() - began) * 1000)

    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(timed):
        response = client.get(url)
    statements = list(zip(durations, (q["sql"] for q in captured.captured_queries)))
    slowest = max((s for s in statements if not s[1].startswith("EXPLAIN")), default=(0.0, ""))
    times.sort()
    return Measurement(
        page=page, status=response.status_code, median_ms=statistics.median(times),
        p95_ms=times[math.ceil(0.95 * len(times)) - 1], queries=len(statements),
        full_counts=[t for t in (_full_count(sql) for _, sql in statements) if t],
        shown=_shown(response.content.decode()), slowest_ms=slowest[0], slowest_sql=slowest[1],
    )


def _short(sql: str, width: int) -> str:
    """The statement with its column list elided, cut to ``width``."""
    text = re.sub(r"^SELECT (?!COUNT).*? FROM ", "SELECT … FROM ", sql, count=1, flags=re.S)
    return text if len(text) <= width else text[: width - 1] + "…"


def _plan_node(node: dict[str, Any]) -> str:
    text = node["Node Type"]
    if "Index Name" in node:
        text += f" using {node['Index Name']}"
    if "Relation Name" in node:
        text += f" on {node['Relation Name']}"
    rows = node.get("Actual Rows", 0) * node.get("Actual Loops", 1)
    removed = node.get("Rows Removed by Filter", 0) * node.get("Actual Loops", 1)
    text += f" ({rows:,} rows" + (f", {removed:,} filtered out)" if removed else ")")
    if removed > WIDE_SCAN or (node["Node Type"] == "Seq Scan" and rows + removed > WIDE_SCAN):
        text = f"!! {text}"
    children = [_plan_node(child) for child in node.get("Plans", [])]
    if len(children) == 1:
        return f"{text} > {children[0]}"
    return f"{text} > [{' | '.join(children)}]" if children else text


def _explain(sql: str) -> str:
    from django.db import connection

    if not sql.lstrip().upper().startswith("SELECT"):
        return "(not a SELECT)"
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return f"{plan[0]['Execution Time']:.1f} ms: {_plan_node(plan[0]['Plan'])}"


def _report(results: list[Measurement]) -> None:
    print(f"\n{'page':<46} {'user':<10} {'median':>7} {'p95':>7} {'queries':>7} {'full COUNT':<11} {'shown':>11} "
          f"{'slowest':>8}  slowest statement")
    for m in results:
        flag = ",".join(m.full_counts) or "-"
        status = "" if m.status == 200 else f" HTTP {m.status}"
        print(f"{m.page.label[:46]:<46} {m.page.who:<10} {m.median_ms:7.1f} {m.p95_ms:7.1f} {m.queries:>7} "
              f"{flag:<11} {m.shown:>11} {m.slowest_ms:8.1f}  {_short(m.slowest_sql, 90)}{status}")
    print(f"\nPlans of each page's slowest statement (EXPLAIN ANALYZE; !! marks a scan reading over {WIDE_SCAN:,} rows:"
          " a Seq Scan, or an index scan filtering them out):")
    for m in results:
        print(f"- {m.page.label} [{m.page.who}]\n    {_short(m.slowest_sql, 160)}\n    {_explain(m.slowest_sql)}")
    print()
    for m in results:
        slow = " SLOW" if m.median_ms > SLOW_MS else ""
        count = f"; full COUNT over {', '.join(m.full_counts)}" if m.full_counts else ""
        print(f"{m.page.label} [{m.page.who}]: median {m.median_ms:.1f} ms{slow}{count}")
    slow_pages = [m for m in results if m.median_ms > SLOW_MS or m.full_counts]
    print(f"\npages over {SLOW_MS:.0f} ms median or with a full COUNT: {len(slow_pages)} of {len(results)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--db", default="relayops_bench_admin")
    args = parser.parse_args()

    started = time.perf_counter()
    _setup(args.db)
    from django.test import Client

    users = _users()
    print(f"seeding {args.jobs:,} finished jobs over {len(TENANTS)} tenants ({SMALL} {TENANTS[SMALL] / BUCKETS:.1%}, "
          f"{LARGE} {TENANTS[LARGE] / BUCKETS:.0%}) ...", flush=True)
    _seed(args.jobs, users["superuser"].pk)
    clients = {who: Client() for who in users}
    for who, client in clients.items():
        client.force_login(users[who])
    pages = _pages(_samples())
    print(f"measuring {len(pages)} pages, {args.repeats} requests each after a warm-up ...", flush=True)
    results = [_measure(clients[page.who], page, args.repeats) for page in pages]
    _report(results)
    print(f"total run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
