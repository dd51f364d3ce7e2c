"""Drain throughput straight to PostgreSQL and through PgBouncer in transaction mode, same run.

Usage: ./run bench pgbouncer [--jobs 1000] [--workers 2] [--rounds 3] [--pool-size 2] [--db relayops_bench_pgb]
Creates the benchmark database on the DATABASE_URL server and a private PgBouncer in front of it
(tests/pgbouncer.py; needs the ``pgbouncer`` binary). Each round enqueues ``--jobs`` jobs, then
``--workers`` processes run real drains (claim, no-op extraction, commit, relay, review hand-off)
until every job is reviewed, once with ``DATABASE_URL`` straight to PostgreSQL and once through
PgBouncer; the listeners always connect straight (``RELAYOPS_LISTEN_DATABASE_URL``). Prints jobs/s
per round, from the first lease to the last publication (process start-up is not counted), and the
medians, with PgBouncer's own CPU per job (from /proc). Rounds alternate, so a noisy neighbour hurts
both sides alike.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import statistics
import tempfile
from pathlib import Path

from benchdb import database_url, fresh_database  # bench/ is on sys.path when run as a script

CLK_TCK = os.sysconf("SC_CLK_TCK")
TABLES = ("pipeline_job, pipeline_attempt, pipeline_result, pipeline_outboxevent, pipeline_consumedevent, "
          "pipeline_review, pipeline_drainpresence")


def _noop_extractor(document, checkpoint):
    return {"invoice_number": document.document_id, "total": "1.00"}


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _drain_until_done(url: str, listen_url: str, name: str) -> None:
    """A worker: drains of one second back to back until no job waits and every event is published."""
    os.environ.update(DATABASE_URL=url, RELAYOPS_LISTEN_DATABASE_URL=listen_url, LOG_LEVEL="WARNING",
                      DJANGO_SETTINGS_MODULE="relayops.settings")
    import django

    django.setup()
    from pipeline.models import Job, OutboxEvent
    from pipeline.plugins import configured_publisher
    from pipeline.processing import process_once
    from pipeline.runtime.drain import Drain
    from pipeline.runtime.shutdown import StopState
    from pipeline.states import TERMINAL_STATUSES

    work = functools.partial(process_once, extractor=_noop_extractor, validator=lambda fields: fields, heartbeat=True)
    while True:
        Drain(name, max_seconds=1.0, poll_seconds=0.2, work=work, publisher=configured_publisher(),
              stop=StopState()).run()
        if not (Job.objects.exclude(status__in=TERMINAL_STATUSES).exists()
                or OutboxEvent.objects.filter(published_at__isnull=True).exists()):
            return


def _round(label: str, url: str, listen_url: str, jobs: int, workers: int, tag: str) -> float:
    from django.db import connection

    from pipeline import queue

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {TABLES} CASCADE")
    for n in range(jobs):
        queue.enqueue("bench", f"doc-{tag}-{n}", 1, {"text": "x"})
    connection.close()
    spawn = mp.get_context("spawn")  # a fresh interpreter reads its own DATABASE_URL
    procs = [spawn.Process(target=_drain_until_done, args=(url, listen_url, f"{label}-{i}")) for i in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    if any(proc.exitcode for proc in procs):
        raise SystemExit(f"a {label} worker failed: exit codes {[proc.exitcode for proc in procs]}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM (SELECT max(published_at) FROM pipeline_outboxevent)"
                       " - (SELECT min(leased_at) FROM pipeline_attempt)), (SELECT count(*) FROM pipeline_review)")
        seconds, reviews = cursor.fetchone()
    if reviews != jobs:
        raise SystemExit(f"{label}: {reviews} reviews for {jobs} jobs")
    return jobs / float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--db", default="relayops_bench_pgb")
    args = parser.parse_args()

    from tests.pgbouncer import BINARY, PgBouncer

    if BINARY is None:
        raise SystemExit("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    fresh_database(args.db)
    from django.conf import settings
    from django.db import connection

    with connection.cursor() as cursor:  # a throwaway database: let TRUNCATE empty the append-only tables
        cursor.execute("ALTER TABLE dlq_auditentry DISABLE TRIGGER dlq_auditentry_no_truncate")
        cursor.execute("ALTER TABLE review_reviewdecision DISABLE TRIGGER review_reviewdecision_no_truncate")
    db = settings.DATABASES["default"]
    direct = database_url(args.db)
    with tempfile.TemporaryDirectory(prefix="relayops-pgbouncer-") as directory:
        pooler = PgBouncer(Path(directory), database=args.db, host=db["HOST"] or "127.0.0.1",
                           port=int(db["PORT"] or 5432), user=db["USER"], password=db["PASSWORD"],
                           pool_size=args.pool_size)
        pooler.start()
        assert pooler.proc is not None
        rates: dict[str, list[float]] = {"direct": [], "pgbouncer": []}
        pooler_cpu = 0.0
        try:
            for n in range(args.rounds):
                for label, url in (("direct", direct), ("pgbouncer", pooler.url)):
                    cpu = _cpu_seconds(pooler.proc.pid)
                    rate = _round(label, url, direct, args.jobs, args.workers, f"{n}-{label}")
                    if label == "pgbouncer":
                        pooler_cpu += _cpu_seconds(pooler.proc.pid) - cpu
                    rates[label].append(rate)
                    print(f"round {n + 1} {label:>9}: {rate:,.0f} jobs/s", flush=True)
        finally:
            pooler.stop()
    print(f"{args.jobs} jobs x {args.rounds} rounds, {args.workers} workers, PgBouncer pool {args.pool_size}:")
    for label, values in rates.items():
        print(f"  {label:>9}: median {statistics.median(values):,.0f} jobs/s "
              f"({', '.join(f'{v:,.0f}' for v in values)})")
    print(f"  PgBouncer's own CPU: {pooler_cpu * 1000 / (args.jobs * args.rounds):.2f} ms per job")


if __name__ == "__main__":
    main()
