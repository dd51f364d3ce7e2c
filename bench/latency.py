"""Wake-up latency of an idle cluster: enqueue -> job start, and commit -> event published.

Usage: ./run bench latency [--jobs 300] [--gap 0.1] [--db relayops_b3_latency]
Creates the benchmark database on the DATABASE_URL server, starts ``manage.py qcluster`` against it
as a subprocess, waits until its drains are parked on LISTEN, then enqueues one job at a time,
waiting for each to be published (plus ``--gap``) so every job meets an idle cluster. Prints the
median, p95 and max of both latencies and their ratios to the targets (start: median 10 ms, p95 50 ms;
published: median 20 ms).
Timestamps: the bench's clock just before ``enqueue``; the worker's ``leased_at``; the outbox row's
``created_at`` (taken before the commit) and ``published_at`` (one machine, one clock).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time

from benchdb import ROOT, fresh_database, stop, wait as _wait  # bench/ is on sys.path when run as a script
TARGETS = {"enqueue -> start": {"median": 10.0, "p95": 50.0}, "commit -> published": {"median": 20.0}}


def _setup(db: str) -> None:
    fresh_database(db, DJANGO_Q_LOG_LEVEL="WARNING", RELAYOPS_NODE_NAME="bench")


def _one(n: int) -> tuple[float, float]:
    from pipeline import queue
    from pipeline.extraction import synthetic
    from pipeline.models import Job, OutboxEvent

    payload = synthetic.valid(n).payload  # a real invoice: extracted, validated, committed, published
    before = dt.datetime.now(dt.timezone.utc)
    job, _ = queue.enqueue("bench", f"doc-{n}", 1, payload)
    event = _wait(lambda: OutboxEvent.objects.filter(idempotency_key=job.idempotency_key,
                                                     published_at__isnull=False).first(), 10, f"job {n}")
    leased_at = Job.objects.values_list("leased_at", flat=True).get(pk=job.pk)
    start_ms = (leased_at - before).total_seconds() * 1000
    publish_ms = (event.published_at - event.created_at).total_seconds() * 1000
    return start_ms, publish_ms


def figures(values: list[float]) -> dict[str, float]:
    """Median, p95 (nearest rank) and max of a list of milliseconds."""
    values = sorted(values)
    return {"median": statistics.median(values), "p95": values[int(0.95 * (len(values) - 1))], "max": values[-1]}


def _report(name: str, values: list[float]) -> None:
    figures_ = figures(values)
    print(f"{name}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in figures_.items()) + f"  (n={len(values)})")
    for key, target in TARGETS[name].items():
        verdict = "met" if figures_[key] <= target else "NOT met"
        print(f"  {key} / target {target:g} ms = {figures_[key] / target:.2f}  -> {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--gap", type=float, default=0.1, help="idle seconds between jobs")
    parser.add_argument("--db", default="relayops_b3_latency")
    args = parser.parse_args()

    _setup(args.db)
    from django.db import connection

    from pipeline.models import DrainPresence

    connection.close()
    cluster = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=os.environ.copy(),
                               start_new_session=True)
    try:
        _wait(lambda: DrainPresence.objects.count() >= 2, 30, "two parked drains")
        starts, publishes = [], []
        began = time.monotonic()
        for n in range(args.warmup + args.jobs):
            start_ms, publish_ms = _one(n)
            if n >= args.warmup:
                starts.append(start_ms)
                publishes.append(publish_ms)
            time.sleep(args.gap)  # let the drains park again: every job meets an idle cluster
        print(f"{args.jobs} jobs, one at a time, over {time.monotonic() - began:.0f} s "
              f"(drains hand over every RELAYOPS_DRAIN_SECONDS; those moments are included)")
        _report("enqueue -> start", starts)
        _report("commit -> published", publishes)
    finally:
        stop(cluster, 60)


if __name__ == "__main__":
    main()
