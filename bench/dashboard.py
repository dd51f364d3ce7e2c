"""The dashboard (the admin's front page and its dashboard.json) and /metrics over a million jobs.

Usage: ./run bench dashboard [--jobs 1000000] [--repeats 10] [--db relayops_bench_dashboard]
Seeds the benchmark database like ``bench/admin_lists.py`` (``--jobs`` finished jobs over six tenants,
dead letters, results, outbox events, reviews, a live backlog), plus one attempt per leased job (its
due time, inference and commit time) and a week of samples, one a minute (queue depth per tenant,
throughput by outcome, dead letters by reason, outbox lag, drains per node), as a week of sweeps
leaves them. Then it times, per user (a superuser, an operator of the smallest and of the largest
tenant) and per window (1h, 24h, 7d), the front page and dashboard.json read afresh (no cache): median
and p95 (nearest rank) of ``--repeats`` requests after a warm-up, the queries of one more request and the
slowest of them; then the wide windows as the page's refresh sees them, kept 30 s.
Last, /metrics as Prometheus scrapes it, after the sweeper's first fold of the measures' running
totals (timed: the one-time cost of the first sweep after an upgrade). ``--reuse`` measures again a
database an earlier run seeded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
import time
from typing import Any

from admin_lists import LARGE, SMALL, TENANTS, _seed, _setup, _users  # bench/ is on sys.path as a script
from benchdb import use_database

BUDGET_MS = 300.0
WINDOWS = ("1h", "24h", "7d")
SAMPLE_DAYS = 7
NODES = 3

# One closed attempt per job that was leased (the seed's jobs ran once or were cancelled unleased):
# due a few seconds before its lease, an inference of milliseconds to two seconds, a commit of a few ms.
ATTEMPTS = """
INSERT INTO pipeline_attempt (job_id, tenant, fence, attempt, worker, due_at, leased_at, ended_at, error_code,
                              extractor, inference_seconds, commit_seconds)
SELECT id, tenant, fence, greatest(attempt, 1), lease_owner,
       leased_at - (mod(abs(hashint8(id)), 5000) / 1000.0) * interval '1 second', leased_at,
       finished_at, CASE WHEN status = 'succeeded' THEN '' ELSE last_error_code END, 'rules',
       0.001 + mod(abs(hashint8(id + 7)), 2000) / 1000.0,
       CASE WHEN status = 'succeeded' THEN 0.002 + mod(abs(hashint8(id + 13)), 30) / 1000.0 END
FROM pipeline_job WHERE leased_at IS NOT NULL ORDER BY id
"""

DEPTH_SAMPLES = """
INSERT INTO pipeline_queuedepthsample (sampled_at, tenant, queued, leased, due, oldest_due_seconds, outbox_pending)
SELECT %(now)s::timestamptz - m * interval '1 minute', t, mod(m + length(t) * 7, 40), mod(m, 3), mod(m, 20),
       mod(m, 30)::float, mod(m, 5)
FROM generate_series(0, %(minutes)s) AS m, unnest(%(tenants)s::text[]) AS t
"""

METRIC_SAMPLES = """
INSERT INTO pipeline_metricsample (sampled_at, metric, tenant, label, value)
SELECT %(now)s::timestamptz - m * interval '1 minute', 'finished_per_minute', t, o, 1 + mod(m, 17)
FROM generate_series(0, %(minutes)s) AS m, unnest(%(tenants)s::text[]) AS t,
     unnest(ARRAY['succeeded', 'dead_lettered', 'cancelled']) AS o
UNION ALL
SELECT %(now)s::timestamptz - m * interval '1 minute', 'dead_letters', t, r, 1000 - m / 100
FROM generate_series(0, %(minutes)s) AS m, unnest(%(tenants)s::text[]) AS t,
     unnest(ARRAY['permanent_error', 'max_attempts_exceeded']) AS r
UNION ALL
SELECT %(now)s::timestamptz - m * interval '1 minute', 'outbox_lag_seconds', t, '', mod(m, 13) / 10.0
FROM generate_series(0, %(minutes)s) AS m, unnest(%(tenants)s::text[]) AS t
UNION ALL
SELECT %(now)s::timestamptz - m * interval '1 minute', 'reprocess_refusals', t, '', 1
FROM generate_series(0, %(minutes)s) AS m, unnest(%(tenants)s::text[]) AS t WHERE mod(m, 97) = 0
UNION ALL
SELECT %(now)s::timestamptz - m * interval '1 minute', 'drains_alive', '', 'node-' || n, 4
FROM generate_series(0, %(minutes)s) AS m, generate_series(0, %(nodes)s - 1) AS n
"""

PRESENCES = """
INSERT INTO pipeline_drainpresence (worker, node, started_at, seen_at, progress_at)
SELECT 'node-' || n || ':' || (1000 + w), 'node-' || n, %(now)s::timestamptz - interval '1 hour', %(now)s, %(now)s
FROM generate_series(0, %(nodes)s - 1) AS n, generate_series(1, 4) AS w
"""


def _seed_measures() -> None:
    from django.db import connection

    now = dt.datetime.now(dt.timezone.utc)
    params = {"now": now, "minutes": SAMPLE_DAYS * 24 * 60, "tenants": list(TENANTS), "nodes": NODES}
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
        for label, statement in (("attempts", ATTEMPTS), ("depth samples", DEPTH_SAMPLES),
                                 ("metric samples", METRIC_SAMPLES), ("drain presences", PRESENCES)):
            began = time.perf_counter()
            cursor.execute(statement, params)
            print(f"  {label:<20} {cursor.rowcount:>10,} rows {time.perf_counter() - began:7.1f} s", flush=True)
        cursor.execute("VACUUM ANALYZE")


def _timed(client: Any, url: str, repeats: int) -> tuple[float, float, int, float, str]:
    from django.db import connection

    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - began) * 1000)
    statements: list[tuple[float, str]] = []

    def timed(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append(((time.perf_counter() - began) * 1000, sql))

    with connection.execute_wrapper(timed):
        client.get(url)
    slowest = max(statements, default=(0.0, ""))
    times.sort()
    return statistics.median(times), times[math.ceil(0.95 * len(times)) - 1], len(statements), slowest[0], slowest[1]


def _short(sql: str, width: int = 100) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--db", default="relayops_bench_dashboard")
    parser.add_argument("--reuse", action="store_true", help="measure the database an earlier run seeded")
    args = parser.parse_args()

    started = time.perf_counter()
    if args.reuse:
        use_database(args.db, DEBUG="0", ALLOWED_HOSTS="localhost,127.0.0.1,testserver")
    else:
        _setup(args.db)
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from pipeline.clock import system_clock
    from pipeline.maintenance.totals import TotalsFolder

    if args.reuse:
        users = {"superuser": get_user_model().objects.get(username="root"),
                 f"op {SMALL}": get_user_model().objects.get(username=f"op-{SMALL}"),
                 f"op {LARGE}": get_user_model().objects.get(username=f"op-{LARGE}")}
        print(f"reusing {args.db} as seeded by an earlier run", flush=True)
    else:
        users = _users()
        print(f"seeding {args.jobs:,} finished jobs over {len(TENANTS)} tenants, their attempts and a week of "
              "samples ...", flush=True)
        _seed(args.jobs, users["superuser"].pk)
        _seed_measures()
    began = time.perf_counter()  # the first sweep after an upgrade folds the whole history, once
    folded = TotalsFolder().run_once(system_clock.now())
    print(f"  fold of the measures' running totals: {folded} totals, {time.perf_counter() - began:.1f} s", flush=True)
    clients = {who: Client() for who in users}
    for who, client in clients.items():
        client.force_login(users[who])

    cached = settings.RELAYOPS["DASHBOARD_CACHE_SECONDS"]
    settings.RELAYOPS["DASHBOARD_CACHE_SECONDS"] = 0.0  # every request below reads the database
    rows = []
    for who in ("superuser", f"op {SMALL}", f"op {LARGE}"):
        for window in WINDOWS:
            for page, url in (("dashboard.json", reverse("admin:relayops_dashboard_data")),
                              ("front page", reverse("admin:index"))):
                median, p95, queries, slowest_ms, slowest = _timed(clients[who], f"{url}?window={window}", args.repeats)
                rows.append((page, who, window, median, p95, queries, slowest_ms, slowest))
    print(f"\n{'page':<15} {'user':<10} {'window':<6} {'median':>8} {'p95':>8} {'queries':>7} {'slowest':>8}  statement")
    for page, who, window, median, p95, queries, slowest_ms, slowest in rows:
        flag = " SLOW" if median > BUDGET_MS else ""
        print(f"{page:<15} {who:<10} {window:<6} {median:8.1f} {p95:8.1f} {queries:>7} {slowest_ms:8.1f}  "
              f"{_short(slowest)}{flag}")
    over = [r for r in rows if r[3] > BUDGET_MS]
    print(f"\nrequests over {BUDGET_MS:.0f} ms median: {len(over)} of {len(rows)}")

    settings.RELAYOPS["DASHBOARD_CACHE_SECONDS"] = cached
    for window in ("24h", "7d"):  # what the page's refresh every 5 s costs with the wide windows kept 30 s
        median, p95, *_ = _timed(clients["superuser"], f"{reverse('admin:relayops_dashboard_data')}?window={window}",
                                 args.repeats)
        print(f"dashboard.json  superuser  {window:<6} with RELAYOPS_DASHBOARD_CACHE_SECONDS={cached:g}: "
              f"median {median:.1f} ms, p95 {p95:.1f} ms")

    settings.RELAYOPS_METRICS_TOKEN = "bench-token"
    scraper = Client(HTTP_AUTHORIZATION="Bearer bench-token")
    median, p95, queries, slowest_ms, slowest = _timed(scraper, "/metrics", max(3, args.repeats // 3))
    print(f"/metrics (one scrape): median {median:.1f} ms, p95 {p95:.1f} ms, {queries} queries, "
          f"slowest {slowest_ms:.1f} ms: {_short(slowest)}")
    print(f"total run: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
