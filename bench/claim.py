"""The claim's selection alone, with and without the paused-tenant filter, over a backlog of live jobs.

Usage: ./run bench claim [--jobs 200000] [--finished 1000000] [--repeats 300] [--db relayops_bench_claim]
Seeds (set-based SQL) ``--finished`` finished jobs and ``--jobs`` queued, due jobs over six tenants, then
times the claim's selection as the workers' claim function runs it (``sql.CLAIM_NEXT``, the next job locked,
in a transaction rolled back so every repeat takes the same head of the line): the statement without the paused-tenant filter (as before
tenant controls existed) against the statement with it, interleaved, with no control row and with a
control row per tenant none paused; then with the tenant owning the first ``--paused-head`` jobs in line
paused. Prints the median, p95 and p99 per case.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time

from benchdb import fresh_database  # bench/ is on sys.path when run as a script

TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "wonka")

SEED = """
INSERT INTO pipeline_job (tenant, document_id, operation_version, idempotency_key, payload, payload_hash,
    status, attempt, max_attempts, lease_expiries, max_lease_expiries, created_at, visible_at, lease_until,
    leased_at, deadline_at, lease_owner, fence, last_error_code, finished_at, reprocessed_from_id)
SELECT t, d, 1, t || ':' || d || ':v1', '{{}}'::jsonb, md5(d) || md5(t),
       CASE WHEN g <= %(finished)s THEN 'succeeded' ELSE 'queued' END, 0, 3, 0, 10, c, c, NULL, NULL,
       now() + interval '1 day', '', 0, '', CASE WHEN g <= %(finished)s THEN c END, NULL
FROM (SELECT g, CASE WHEN g > %(finished)s AND g <= %(finished)s + %(head)s THEN 'acme'
                     ELSE ('{tenants}'::text[])[1 + mod(g, 6)] END AS t,
             'doc-' || g AS d, now() - interval '1 hour' + g * interval '1 millisecond' AS c
      FROM generate_series(1, %(finished)s + %(jobs)s) AS g) AS n
ORDER BY g
"""


def time_claim(statement: str, repeats: int) -> list[float]:
    from django.db import connection, transaction

    from pipeline import sql

    now = dt.datetime.now(dt.timezone.utc)
    params = {"now": sql.ts(now)}
    samples = []
    for _ in range(repeats):
        with transaction.atomic():
            began = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
                assert cursor.fetchall(), "the claim found nothing"
            samples.append((time.perf_counter() - began) * 1000)
            transaction.set_rollback(True)
    return samples


def interleaved(one: str, other: str, repeats: int) -> tuple[list[float], list[float]]:
    first: list[float] = []
    second: list[float] = []
    for _ in range(repeats):
        first += time_claim(one, 1)
        second += time_claim(other, 1)
    return first, second


def report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    print(f"{name:<58} median {statistics.median(samples):6.3f} ms  p95 {pick(0.95):6.3f} ms  "
          f"p99 {pick(0.99):6.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--paused-head", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--db", default="relayops_bench_claim")
    args = parser.parse_args()
    fresh_database(args.db)
    from django.db import connection

    from pipeline import sql
    from tenancy.models import TenantControl

    with connection.cursor() as cursor:
        cursor.execute(SEED.format(tenants="{" + ",".join(TENANTS) + "}"),
                       {"jobs": args.jobs, "finished": args.finished, "head": args.paused_head})
        cursor.execute("ANALYZE")
    filtered = sql.CLAIM_NEXT
    unfiltered = filtered.replace(f"      AND tenant NOT IN ({sql.PAUSED_TENANTS})\n", "")
    assert unfiltered != filtered, "the paused-tenant filter was not found in the claim"
    print(f"{args.finished:,} finished jobs, {args.jobs:,} queued and due; {args.repeats} claims per case, "
          "the cases of one table state interleaved (each rolled-back claim leaves dead row versions behind)")
    for _ in range(2):  # warm the caches
        time_claim(unfiltered, 20)
    before, after = interleaved(unfiltered, filtered, args.repeats)
    report("no control row: without the paused-tenant filter (before)", before)
    report("no control row: with it", after)
    now = dt.datetime.now(dt.timezone.utc)
    TenantControl.objects.bulk_create([TenantControl(tenant=t, updated_at=now) for t in TENANTS])
    before, after = interleaved(unfiltered, filtered, args.repeats)
    report("a control row per tenant, none paused: without the filter", before)
    report("a control row per tenant, none paused: with it", after)
    TenantControl.objects.filter(tenant="acme").update(intake_paused=True, paused_at=now)
    report(f"the tenant of the first {args.paused_head:,} due jobs paused", time_claim(filtered, args.repeats))
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (COSTS OFF) " + filtered.replace("%(now)s", "now()"))
        print("\n".join(row[0] for row in cursor.fetchall()))


if __name__ == "__main__":
    main()
