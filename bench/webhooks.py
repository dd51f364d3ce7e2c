"""Webhook delivery on an idle cluster, and a burst: commit -> the receiver has the event.

Usage: ./run bench webhooks [--jobs 200] [--burst 500] [--gap 0.1] [--db relayops_bench_webhooks]
Creates the benchmark database on the DATABASE_URL server, starts the test receiver
(tests/webhooks/receiver.py: verifies the signature, dedupes, logs the time it got each event) on
loopback and one endpoint for its tenant, then ``manage.py qcluster`` as a subprocess. First one job
at a time (each meets an idle cluster): the median, p95 and max of the outbox row's ``created_at``
(taken before the commit) to the receiver's arrival time. Then ``--burst`` jobs enqueued at once: the
time until the receiver has them all, and deliveries per second. One machine, one clock.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchdb import ROOT, fresh_database, stop  # bench/ is on sys.path when run as a script

RECEIVER = ROOT / "tests" / "webhooks" / "receiver.py"


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)
    return value


def _arrivals(state: Path) -> dict[str, float]:
    log = state / "log.jsonl"
    if not log.exists():
        return {}
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
    bad = [e for e in entries if not e["valid"]]
    if bad:
        raise SystemExit(f"{len(bad)} deliveries failed the receiver's signature check")
    return {e["event_id"]: e["at"] for e in entries if not e["duplicate"]}


def _report(name: str, values: list[float]) -> None:
    values = sorted(values)
    figures = {"median": statistics.median(values), "p95": values[int(0.95 * (len(values) - 1))], "max": values[-1]}
    print(f"{name}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in figures.items()) + f"  (n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--gap", type=float, default=0.1, help="idle seconds between jobs")
    parser.add_argument("--db", default="relayops_bench_webhooks")
    args = parser.parse_args()

    fresh_database(args.db, DJANGO_Q_LOG_LEVEL="WARNING", RELAYOPS_NODE_NAME="bench", RELAYOPS_WEBHOOK_ALLOW_PRIVATE="1")
    from django.db import connection

    from pipeline import queue
    from pipeline.extraction import synthetic
    from pipeline.models import DrainPresence, OutboxEvent
    from webhooks.services import create_endpoint

    state = Path(tempfile.mkdtemp(prefix="relayops-bench-webhooks-"))
    (state / "secret").write_text("unknown yet")
    receiver = subprocess.Popen([sys.executable, str(RECEIVER), str(state)])
    port = int(_wait(lambda: (state / "port").exists() and (state / "port").read_text(), 30, "the receiver"))
    made = create_endpoint("bench", f"http://127.0.0.1:{port}/hook", ["extraction.completed"], by="bench")
    (state / "secret").write_text(made.secret)
    connection.close()
    cluster = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=os.environ.copy(),
                               start_new_session=True)
    try:
        _wait(lambda: DrainPresence.objects.count() >= 2, 30, "two parked drains")
        latencies = []
        for n in range(args.warmup + args.jobs):
            job, _ = queue.enqueue("bench", f"one-{n}", 1, synthetic.valid(n).payload)
            event = _wait(lambda: OutboxEvent.objects.filter(idempotency_key=job.idempotency_key).first(), 10, "commit")
            arrived = _wait(lambda: _arrivals(state).get(str(event.event_id)), 10, f"delivery {n}")
            if n >= args.warmup:
                latencies.append((arrived - event.created_at.timestamp()) * 1000)
            time.sleep(args.gap)
        print(f"{args.jobs} jobs one at a time, each to one webhook endpoint on loopback")
        _report("commit -> receiver has it", latencies)
        before = len(_arrivals(state))
        began = time.monotonic()
        for n in range(args.burst):
            queue.enqueue("bench", f"burst-{n}", 1, synthetic.valid(n).payload)
        _wait(lambda: len(_arrivals(state)) >= before + args.burst, 600, "the burst's deliveries")
        took = time.monotonic() - began
        print(f"burst of {args.burst} jobs: all delivered in {took:.1f} s ({args.burst / took:.0f} jobs/s end to end, "
              f"extraction included); duplicates at the receiver: "
              f"{sum(1 for line in (state / 'log.jsonl').read_text().splitlines() if json.loads(line)['duplicate'])}")
        pending = OutboxEvent.objects.unpublished().count()
        print(f"unpublished events left: {pending}")
    finally:
        stop(cluster, 60)
        receiver.kill()
        receiver.wait(10)


if __name__ == "__main__":
    main()
