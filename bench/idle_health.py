"""Health on idle nodes, and on a wedged one: false alarms, presence gaps, time to flag a wedge.

Usage: ./run bench idle_health [--minutes 10] [--nodes 2] [--every 1] [--db relayops_bench_health]
Creates the benchmark database on the DATABASE_URL server and starts ``--nodes`` idle qcluster nodes.
For ``--minutes`` it asks ``relayops_health``'s assessment of every node each ``--every`` seconds
(the default window, RELAYOPS_HEALTH_STALE_SECONDS) and records how old each node's newest drain
presence was: the longest gap and the number of unhealthy verdicts (false alarms: the nodes are
idle and fine). Then it SIGSTOPs every worker of the first node, enqueues a job, and measures how
long until that node is flagged (the target: within 30 s), and that the others stay healthy.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from benchdb import ROOT, fresh_database  # bench/ is on sys.path when run as a script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--db", default="relayops_bench_health")
    args = parser.parse_args()

    fresh_database(args.db)
    from django.conf import settings
    from django.db.models import Max
    from django.utils import timezone

    from pipeline import queue
    from pipeline.models import DrainPresence
    from pipeline.runtime import liveness

    stale = settings.RELAYOPS["HEALTH_STALE_SECONDS"]
    names = [f"health-{n}" for n in range(args.nodes)]
    procs = [subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, start_new_session=True,
                              env={**os.environ, "RELAYOPS_NODE_NAME": name}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for name in names]
    try:
        while DrainPresence.objects.values("node").distinct().count() < args.nodes:
            time.sleep(0.1)
        print(f"{args.nodes} idle nodes; window {stale:.0f} s; one look every {args.every:g} s "
              f"for {args.minutes:g} min", flush=True)
        gaps = {name: 0.0 for name in names}
        alarms = {name: 0 for name in names}
        looks = 0
        end = time.monotonic() + args.minutes * 60
        while time.monotonic() < end:
            now = timezone.now()
            seen = dict(DrainPresence.objects.values("node").annotate(at=Max("seen_at")).values_list("node", "at"))
            for name in names:
                gaps[name] = max(gaps[name], (now - seen[name]).total_seconds())
                alarms[name] += not liveness.assess(now, node=name, stale_seconds=stale).healthy
            looks += 1
            time.sleep(args.every)
        for name in names:
            print(f"  {name}: {looks} looks, {alarms[name]} false alarms, longest presence gap {gaps[name]:.2f} s")

        workers = [int(w.rsplit(":", 1)[1]) for w in
                   DrainPresence.objects.filter(node=names[0]).values_list("worker", flat=True)]
        workers = [pid for pid in workers if _in_group(pid, procs[0].pid)]
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        queue.enqueue("bench", "due", 1, {"text": "INVOICE NO: 1\nDATE: 2026-01-01\nVENDOR: v\nTOTAL: 1.00 EUR"})
        while liveness.assess(timezone.now(), node=names[0], stale_seconds=stale).healthy:
            time.sleep(0.1)
        flagged = time.monotonic() - stopped
        others = [liveness.assess(timezone.now(), node=name, stale_seconds=stale).healthy for name in names[1:]]
        print(f"  {names[0]} with {len(workers)} workers SIGSTOPped and a job due: flagged after {flagged:.1f} s "
              f"(target 30 s); other nodes healthy: {all(others)}")
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _in_group(pid: int, group: int) -> bool:
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False


if __name__ == "__main__":
    main()
