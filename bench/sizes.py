"""Bytes per job on disk: the tables a job writes, measured, and what 10M and 100M jobs would take.

Usage: ./run bench sizes [--jobs 2000] [--copies 99] [--db relayops_bench_sizes]
Drains ``--jobs`` real invoices through a 2-worker ``qcluster`` (bench/compare.py's drain: lease,
extract, validate, commit, relay, review), so every row is one RelayOps wrote; measures each table
(heap, indexes, TOAST) per job; then copies those finished rows ``--copies`` times with set-based SQL
(new ids, keys and event ids; the same contents otherwise), VACUUM ANALYZEs, and measures again: the
per-job figures of a large, freshly loaded table, multiplied out to 10M and 100M jobs. Live tables
carry more (dead tuples between vacuums, index pages split by updates): the drained figures show it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchdb import fresh_database  # bench/ is on sys.path when run as a script
from compare import drain_run

# The tables one processed job writes a row in (the drain presence, samples and sweeps are per node).
TABLES = ("pipeline_job", "pipeline_attempt", "pipeline_result", "pipeline_outboxevent", "pipeline_consumedevent",
          "pipeline_review")
STRIDE = 1_000_000  # copy g's ids are the originals' + g * STRIDE
COPY = {"id": "id + %(offset)s", "job_id": "job_id + %(offset)s", "event_id": "gen_random_uuid()",
        "idempotency_key": "idempotency_key || '-' || %(g)s", "document_id": "document_id || '-' || %(g)s"}


def measure(jobs: int) -> dict[str, dict[str, float]]:
    from django.db import connection

    sizes = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"SELECT (SELECT count(*) FROM {table}), pg_table_size(%s), pg_indexes_size(%s), "
                           "pg_total_relation_size(%s)", [table, table, table])
            rows, heap, indexes, total = cursor.fetchone()
            sizes[table] = {"rows_per_job": rows / jobs, "table_bytes_per_job": heap / jobs,
                            "index_bytes_per_job": indexes / jobs, "total_bytes_per_job": total / jobs}
    return sizes


def copy_rows(copies: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
        cursor.execute("SET session_replication_role = replica")  # a throwaway database: no FK checks per row
        for table in TABLES:
            cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                           "ORDER BY ordinal_position", [table])
            columns = [name for (name,) in cursor.fetchall()]
            values = ", ".join(COPY.get(c, c) for c in columns)
            for g in range(1, copies + 1):
                cursor.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {values} FROM {table} "
                               f"WHERE id < {STRIDE}", {"offset": g * STRIDE, "g": g})
        cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute("VACUUM ANALYZE")


def report(title: str, sizes: dict[str, dict[str, float]]) -> None:
    print(title)
    total = {"table": 0.0, "index": 0.0}
    for table, s in sizes.items():
        total["table"] += s["table_bytes_per_job"]
        total["index"] += s["index_bytes_per_job"]
        print(f"  {table:<24} {s['rows_per_job']:.2f} rows/job  table {s['table_bytes_per_job']:6.0f} B  "
              f"indexes {s['index_bytes_per_job']:6.0f} B  total {s['total_bytes_per_job']:6.0f} B per job")
    per_job = total["table"] + total["index"]
    print(f"  {'all':<24} table {total['table']:.0f} B + indexes {total['index']:.0f} B = {per_job:.0f} B per job; "
          f"10M jobs {per_job * 10e6 / 2**30:.1f} GiB, 100M jobs {per_job * 100e6 / 2**30:.0f} GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--copies", type=int, default=99)
    parser.add_argument("--db", default="relayops_bench_sizes")
    args = parser.parse_args()

    fresh_database(args.db, DJANGO_Q_LOG_LEVEL="WARNING")
    with tempfile.TemporaryDirectory(prefix="relayops-sizes-") as tmp:
        drain_run(args.db, 2, args.jobs, Path(tmp), "WARNING")
    report(f"{args.jobs} jobs drained by a real cluster (live tables):", measure(args.jobs))
    copy_rows(args.copies)
    jobs = args.jobs * (args.copies + 1)
    report(f"{jobs:,} jobs after copying them {args.copies} times and VACUUM ANALYZE:", measure(jobs))


if __name__ == "__main__":
    main()
