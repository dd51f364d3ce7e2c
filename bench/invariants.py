"""check_invariants at scale: how long every invariant takes over a million jobs.

Usage: ./run bench invariants [--jobs 1000000] [--repeats 3] [--db relayops_bench_invariants]
Creates the benchmark database on the DATABASE_URL server and seeds, with set-based SQL, ``--jobs``
finished jobs over six tenants as the pipeline leaves them (90 % succeeded with their attempt, result,
review and consumed event, the newest tenth of them with their published outbox event; 5 % dead-
lettered with their dead letter; 5 % cancelled before any lease), then runs ``check_invariants``'
checks ``--repeats`` times and prints each check's time (median) and the whole run's; then breaks one
row and shows that the run names it.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchdb import fresh_database  # bench/ is on sys.path when run as a script

TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "wonka")

SEED = [
    """
    INSERT INTO pipeline_job (tenant, document_id, operation_version, idempotency_key, payload, payload_hash,
        status, attempt, max_attempts, lease_expiries, max_lease_expiries, created_at, visible_at, lease_until,
        leased_at, deadline_at, lease_owner, fence, last_error_code, finished_at, reprocessed_from_id)
    SELECT t, d, 1, t || ':' || d || ':v1', '{}'::jsonb, md5(d) || md5(t),
           CASE WHEN h < 900 THEN 'succeeded' WHEN h < 950 THEN 'dead_lettered' ELSE 'cancelled' END,
           CASE WHEN h < 950 THEN 1 ELSE 0 END, 3, 0, 10, c, c, NULL,
           CASE WHEN h < 950 THEN c + interval '1 second' END, c + interval '1 day',
           CASE WHEN h < 950 THEN 'node-1:100' ELSE '' END, CASE WHEN h < 950 THEN 1 ELSE 0 END,
           CASE WHEN h < 900 THEN '' WHEN h < 950 THEN 'document_malformed' ELSE 'deadline_exceeded' END,
           c + interval '2 seconds', NULL
    FROM (SELECT g, ('{tenants}'::text[])[1 + mod(g, 6)] AS t, 'doc-' || g AS d,
                 mod(abs(hashint4(g)::bigint), 1000) AS h,
                 now() - (%(jobs)s - g) * interval '2 seconds' AS c
          FROM generate_series(1, %(jobs)s) AS g) AS n
    ORDER BY g
    """,
    """
    INSERT INTO pipeline_attempt (job_id, fence, attempt, worker, leased_at, ended_at, error_code)
    SELECT id, 1, 1, lease_owner, leased_at, finished_at, last_error_code FROM pipeline_job WHERE fence = 1
    """,
    """
    INSERT INTO pipeline_result (job_id, tenant, idempotency_key, payload_hash, data, fence, created_at)
    SELECT id, tenant, idempotency_key, payload_hash, '{}'::jsonb, fence, finished_at
    FROM pipeline_job WHERE status = 'succeeded'
    """,
    """
    INSERT INTO pipeline_review (tenant, document_id, idempotency_key, event_id, job_id, status, created_at)
    SELECT tenant, document_id, idempotency_key, md5(idempotency_key)::uuid, id, 'pending', finished_at
    FROM pipeline_job WHERE status = 'succeeded'
    """,
    """
    INSERT INTO pipeline_consumedevent (consumer, event_id, consumed_at)
    SELECT 'review-handoff', md5(idempotency_key)::uuid, finished_at FROM pipeline_job WHERE status = 'succeeded'
    """,
    """
    INSERT INTO pipeline_outboxevent (event_id, tenant, topic, idempotency_key, payload, created_at, published_at,
                                      publish_attempts)
    SELECT md5(idempotency_key)::uuid, tenant, 'extraction.completed', idempotency_key, '{}'::jsonb, finished_at,
           finished_at, 1
    FROM pipeline_job WHERE status = 'succeeded' AND id > %(jobs)s * 0.9
    """,
    """
    INSERT INTO pipeline_deadletter (job_id, tenant, reason_code, error_code, attempts, created_at)
    SELECT id, tenant, 'permanent_error', last_error_code, attempt, finished_at
    FROM pipeline_job WHERE status = 'dead_lettered'
    """,
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--db", default="relayops_bench_invariants")
    args = parser.parse_args()

    fresh_database(args.db)
    from django.db import connection

    from pipeline.invariants import check_all

    began = time.monotonic()
    with connection.cursor() as cursor:
        for statement in SEED:
            cursor.execute(statement.replace("{tenants}", "{" + ",".join(TENANTS) + "}"), {"jobs": args.jobs})
        cursor.execute("VACUUM ANALYZE")
    print(f"seeded {args.jobs} jobs in {time.monotonic() - began:.0f} s")

    runs = [check_all() for _ in range(args.repeats)]
    assert all(run.holds for run in runs), [f for f in runs[-1].findings if f.broken]
    print(f"check_invariants over {runs[0].jobs} jobs, {args.repeats} runs: whole run median "
          f"{statistics.median(r.seconds for r in runs):.2f} s, max {max(r.seconds for r in runs):.2f} s")
    for n, finding in enumerate(runs[0].findings):
        times = [run.findings[n].seconds for run in runs]
        print(f"  {finding.check:<30} median {statistics.median(times):.2f} s")
    one_tenant = check_all(tenant="wonka")
    print(f"--tenant wonka ({one_tenant.jobs} jobs): {one_tenant.seconds:.2f} s")

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM pipeline_review WHERE id = (SELECT max(id) FROM pipeline_review)")
    broken = check_all()
    print("after deleting one review: " + ", ".join(f"{f.check} broken by {f.broken}" for f in broken.findings
                                                     if f.broken))


if __name__ == "__main__":
    main()
