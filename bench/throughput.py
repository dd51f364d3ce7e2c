"""Hot-path throughput: claim + (result, outbox event, completion) per job, no-op extraction.

Usage: ./run bench throughput [--jobs 4000] [--workers 2] [--db relayops_bench]
Creates (or reuses) the benchmark database on the DATABASE_URL server, enqueues the jobs, then runs
``--workers`` processes calling ``process_once`` until the queue is empty, and prints jobs/s and the
ratio to a reference figure (pgbench with the same two transactions: ~2,800 tps on a 2-core machine).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

from benchdb import fresh_database, use_database  # bench/ is on sys.path when run as a script
REFERENCES = {"pgbench, same two transactions": 2800, "lean psycopg loop": 1900, "Procrastinate": 340,
              "django-q2 ORM broker": 200}


def _noop_extractor(document, checkpoint):
    return {"invoice_number": document.document_id, "total": "1.00"}


def _no_validation(fields):
    return fields


def _worker(db: str, name: str, counts) -> None:
    use_database(db)
    from pipeline.worker import process_once

    done = 0
    while process_once(name, extractor=_noop_extractor, validator=_no_validation).outcome != "idle":
        done += 1
    counts[name] = done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--db", default="relayops_bench")
    args = parser.parse_args()

    fresh_database(args.db)
    from django.db import connection

    from pipeline import queue

    started = time.perf_counter()
    for n in range(args.jobs):
        queue.enqueue("bench", f"doc-{n}", 1, {"text": "x"})
    enqueue_s = time.perf_counter() - started
    print(f"enqueue: {args.jobs} jobs in {enqueue_s:.2f} s = {args.jobs / enqueue_s:,.0f} jobs/s (one process)")
    connection.close()

    counts = mp.Manager().dict()
    procs = [mp.get_context("fork").Process(target=_worker, args=(args.db, f"w{i}", counts)) for i in range(args.workers)]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - started
    total = sum(counts.values())
    rate = total / elapsed
    print(f"process: {total} jobs by {args.workers} workers in {elapsed:.2f} s = {rate:,.0f} jobs/s")
    for name, figure in REFERENCES.items():
        print(f"  ratio to {name} ({figure:,}/s): {rate / figure:.2f}")
    print(f"  goal: >= 0.50 of pgbench -> {'met' if rate >= 1400 else 'not met'}")


if __name__ == "__main__":
    main()
