"""Chaos: real qcluster nodes under injected faults, then proof that nothing was lost or doubled.

Usage: ./run bench chaos [--nodes 3] [--workers 2] [--jobs 2000] [--seconds 300] [--db relayops_chaos]
                         [--seed N] [--pg-restart "COMMAND"] [--keep]
Creates a fresh database on the DATABASE_URL server and starts ``--nodes`` nodes (``manage.py
qcluster``) that reach it through a TCP proxy on loopback (tests/proxy.py). For ``--seconds`` it
enqueues a poison mix across tenants that share document ids (valid invoices, malformed ones, ones
that fail once, ones that always fail, ones past their deadline; one tenant has an active webhook
endpoint, a receiver on loopback in this process, so its events go through the relay while the others'
are handed to review in their commits) while injecting faults: crash points
(workers SIGKILL themselves at 5 % per point), random SIGKILLs of one worker or a whole node (then
restarted), every connection killed (``pg_terminate_backend``), and database outages (the proxy
refuses and drops connections for a few seconds). A PostgreSQL restart runs only with ``--pg-restart``
(a command allowed to restart a server this run owns); without it the table says it was skipped,
since restarting a shared server would hurt everyone on it. Then the faults stop, every job must end
terminal and every event published (``--drain-timeout``), the nodes are stopped with SIGTERM, and it
prints the table (faults, jobs, time to drain, redeliveries, duplicates prevented and let through,
lost jobs, valid documents dead-lettered, events handed off in their commit, webhook events never
POSTed, recovery time after each kind of fault) and
``check_invariants``' verdict. Exit 0 only if nothing was lost or doubled, no valid document failed
and every invariant holds.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchdb import ROOT, database_url, fresh_database  # bench/ is on sys.path when run as a script

TENANTS = ("acme", "globex", "initech")
# This tenant has an active webhook endpoint (a receiver on loopback in this process): its results' events
# go through the relay (claim, review handoff, POST, mark); the others' are handed to review in their commit.
WEBHOOK_TENANT = "initech"
# kind: (share of the mix, what it must end as)
MIX = {"valid": (0.70, "succeeded"), "flaky": (0.10, "succeeded"), "malformed": (0.08, "dead_lettered"),
       "forever": (0.06, "dead_lettered"), "late": (0.06, "cancelled")}
CRASH_POINTS = "after_lease:0.05,after_extract:0.05,after_commit_before_ack:0.05,after_publish_before_mark:0.05"
FAULTS = ("worker_kill", "node_kill", "connection_kill", "outage")


@dataclass
class Node:
    name: str
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=self.env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 60) -> int | None:
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


class Receiver:
    """A webhook receiver on loopback answering 204 to every POST: the events it was sent, with repeats."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.posts: collections.Counter = collections.Counter()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts[self.headers.get("RelayOps-Event-Id", "")] += 1
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/in"

    def close(self) -> None:
        self.server.shutdown()


@dataclass
class Run:
    args: argparse.Namespace
    rng: random.Random
    nodes: list[Node]
    proxy: object
    jobs: dict[int, str] = field(default_factory=dict)  # job id -> kind
    faults: collections.Counter = field(default_factory=collections.Counter)
    recoveries: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    receiver: Receiver | None = None
    skipped: list[str] = field(default_factory=list)
    restarts: int = 0  # nodes that exited on their own (started while the database was away) and were restarted


def supervise(run: Run) -> None:
    """What systemd's Restart=always does: a node that exited on its own is started again."""
    for node in run.nodes:
        if node.proc is not None and node.proc.poll() is not None:
            node.start()
            run.restarts += 1


def enqueue_some(run: Run, count: int) -> None:
    import datetime as dt

    from pipeline import queue
    from pipeline.clock import FrozenClock
    from pipeline.extraction import synthetic

    for _ in range(count):
        n = len(run.jobs)
        kind = run.rng.choices(list(MIX), weights=[share for share, _ in MIX.values()])[0]
        payload: dict = {"text": synthetic.valid(n % 997 + 1).text}
        options: dict = {"max_attempts": 3}
        if kind == "malformed":
            payload = {"text": synthetic.malformed(list(synthetic.Malformed)[n % len(synthetic.Malformed)], n).text}
        elif kind == "flaky":
            payload["simulate"] = {"transient_failures": 1}
        elif kind == "forever":
            payload["simulate"] = {"transient_failures": 99}
        elif kind == "late":
            # Enqueued as of a minute ago with a one-second deadline: past it at any claim, however fast
            # (a deadline of 1 ms from now could still be ahead of a drain woken at once).
            options["deadline"] = dt.timedelta(seconds=1)
            options["clock"] = FrozenClock(dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1))
        if kind in ("valid", "flaky"):
            payload.setdefault("simulate", {})["work_seconds"] = round(run.rng.uniform(0.02, 0.15), 3)
        tenant = TENANTS[n % len(TENANTS)]
        job, _ = queue.enqueue(tenant, f"doc-{n // len(TENANTS)}", 1, payload, **options)  # ids shared by tenants
        run.jobs[job.pk] = kind


def _in_group(pid: int, group: int) -> bool:
    """``pid`` is alive and one of this node's processes (never a stranger that reused a pid)."""
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False


def inject(run: Run, fault: str) -> str | None:
    """Inject ``fault``; return the node it hit (None: every node)."""
    from django.db import connection

    from pipeline.models import DrainPresence

    if fault == "worker_kill":
        node = run.rng.choice(run.nodes)
        pids = [int(w.rsplit(":", 1)[1]) for w in DrainPresence.objects.filter(node=node.name).values_list("worker", flat=True)]
        alive = [pid for pid in pids if node.proc and _in_group(pid, node.proc.pid)]
        if alive:
            os.kill(run.rng.choice(alive), signal.SIGKILL)
        run.faults[fault] += 1
        return node.name
    if fault == "node_kill":
        node = run.rng.choice(run.nodes)
        node.kill()
        time.sleep(run.rng.uniform(0.5, 2.0))  # the node is down this long before its supervisor restarts it
        node.start()
        run.faults[fault] += 1
        return node.name
    elif fault == "connection_kill":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    elif fault == "outage":
        run.proxy.stop()
        time.sleep(run.rng.uniform(2.0, 5.0))  # the database is away this long
        run.proxy.start()
    run.faults[fault] += 1
    return None


def recovery_after(run: Run, fault: str, node: str | None, deadline: float) -> None:
    """Seconds from the end of a fault until the node it hit (every node, for a fault that hit them all)
    is back at full strength: each of its workers looking for work again, and a job committed since."""
    from django.utils import timezone

    from pipeline.models import Attempt, DrainPresence

    ended, began = timezone.now(), time.monotonic()
    names = [node] if node is not None else [n.name for n in run.nodes]
    commits = Attempt.objects.filter(ended_at__gt=ended, error_code="", job__status="succeeded")
    while time.monotonic() < began + deadline:
        back = all(DrainPresence.objects.filter(node=name, seen_at__gt=ended).count() >= run.args.workers
                   for name in names)
        if back and commits.exists():
            run.recoveries[fault].append(time.monotonic() - began)
            return
        supervise(run)
        time.sleep(0.05)
    run.recoveries[fault].append(float("inf"))


def fault_phase(run: Run) -> None:
    end = time.monotonic() + run.args.seconds
    per_tick = max(run.args.jobs // max(int(run.args.seconds / 2), 1), 1)
    while time.monotonic() < end:
        supervise(run)
        if len(run.jobs) < run.args.jobs:
            enqueue_some(run, min(per_tick, run.args.jobs - len(run.jobs)))
        fault = run.rng.choice(FAULTS)
        hit = inject(run, fault)
        enqueue_some(run, 2 * len(run.nodes) * run.args.workers)  # work for every worker of a recovered node
        recovery_after(run, fault, hit, deadline=30)
        time.sleep(run.rng.uniform(0.5, 2.0))
    if run.args.pg_restart:
        subprocess.run(run.args.pg_restart, shell=True, check=True)
        run.faults["postgres_restart"] += 1
        enqueue_some(run, 2 * len(run.nodes) * run.args.workers)
        recovery_after(run, "postgres_restart", None, deadline=60)
    else:
        run.skipped.append("postgres_restart (no --pg-restart command: the server may be shared)")
    if len(run.jobs) < run.args.jobs:
        enqueue_some(run, run.args.jobs - len(run.jobs))


def wait_ready(run: Run, timeout: float = 60) -> None:
    """Every node's drains are parked (each worker recorded its presence)."""
    from pipeline.models import DrainPresence

    end = time.monotonic() + timeout
    while DrainPresence.objects.values("node").distinct().count() < len(run.nodes):
        if time.monotonic() > end:
            raise SystemExit("chaos: the nodes did not start")
        supervise(run)
        time.sleep(0.1)


def drained() -> bool:
    from pipeline.models import Job, OutboxEvent

    return not Job.objects.live().exists() and not OutboxEvent.objects.unpublished().exists()


def wait_drained(run: Run, timeout: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        supervise(run)
        if drained():
            return time.monotonic() - began
        time.sleep(0.2)
    return None


def verdict_rows(run: Run, drain_seconds: float | None) -> tuple[list[tuple[str, str]], bool]:
    from django.db.models import Count, F, Sum

    from pipeline.invariants import check_all
    from pipeline.models import Job, OutboxEvent, Result, Review

    jobs = Job.objects.filter(pk__in=list(run.jobs))
    status = dict(jobs.values_list("pk", "status"))
    lost = [pk for pk in run.jobs if status.get(pk) not in ("succeeded", "dead_lettered", "cancelled")]
    wrong = collections.Counter(kind for pk, kind in run.jobs.items() if status.get(pk) != MIX[kind][1])
    valid_failed = sum(1 for pk, kind in run.jobs.items() if kind in ("valid", "flaky") and status.get(pk) != "succeeded")
    overcharged = jobs.filter(pk__in=[pk for pk, k in run.jobs.items() if k == "valid"], attempt__gt=1).count()
    redelivered = jobs.filter(fence__gt=1).count()
    redeliveries = (jobs.aggregate(n=Sum("fence"))["n"] or 0) - jobs.filter(fence__gt=0).count()
    republished = OutboxEvent.objects.filter(publish_attempts__gt=1, published_at__isnull=False).count()
    doubled = sum(model.objects.values("idempotency_key").annotate(n=Count("pk")).filter(n__gt=1).count()
                  for model in (Result, OutboxEvent, Review))
    report = check_all()
    results = OutboxEvent.objects.filter(topic="extraction.completed")
    hooked = set(map(str, results.filter(tenant=WEBHOOK_TENANT).values_list("event_id", flat=True)))
    posts = run.receiver.posts if run.receiver else collections.Counter()
    undelivered = len(hooked - set(posts))
    in_commit = results.filter(published_at=F("created_at")).exclude(tenant=WEBHOOK_TENANT).count()
    crash_kills = sum(n.log.read_text(errors="replace").count("reincarnated worker") for n in run.nodes)
    rows = [
        ("faults injected", ", ".join(f"{k} {v}" for k, v in sorted(run.faults.items())) or "none"),
        ("workers lost (crash points + kills)", f"{crash_kills} respawned by sentinels"),
        ("nodes restarted by the supervisor", f"{run.restarts} (a node started while the database is away "
                                              "exits 1 at once)"),
        ("skipped", "; ".join(run.skipped) or "nothing"),
        ("jobs", f"{len(run.jobs)} ({', '.join(f'{k} {v}' for k, v in sorted(collections.Counter(run.jobs.values()).items()))})"),
        ("time to drain after the faults", "DID NOT DRAIN" if drain_seconds is None else f"{drain_seconds:.1f} s"),
        ("redeliveries (leases beyond the first)", f"{redeliveries} over {redelivered} jobs"),
        ("duplicates prevented", f"{redelivered} redelivered jobs took effect once; {republished} republished events applied once"),
        ("duplicates that got through (must be 0)", str(doubled)),
        ("lost jobs (must be 0)", str(len(lost))),
        ("valid documents not succeeded (must be 0)", str(valid_failed)),
        ("valid documents charged an extra attempt", str(overcharged)),
        ("events handed to review in their commit", f"{in_commit} of {results.exclude(tenant=WEBHOOK_TENANT).count()} "
                                                    f"(tenants without an endpoint)"),
        (f"webhook: {WEBHOOK_TENANT}'s result events POSTed", f"{len(hooked) - undelivered} of {len(hooked)} "
         f"(through the relay; {sum(posts.values()) - len(posts)} repeated POSTs, deduped by the receiver)"),
        ("result events never POSTed (must be 0)", str(undelivered)),
        ("outcomes not as expected", ", ".join(f"{k} {v}" for k, v in wrong.items()) or "none"),
    ]
    # Recovery: from the end of a fault until the node it hit (every node for a connection kill or an
    # outage) has all its workers looking for work again and a job has been committed since.
    for fault, times in sorted(run.recoveries.items()):
        finite = [t for t in times if t != float("inf")]
        text = (f"median {statistics.median(finite):.2f} s, max {max(finite):.2f} s (n={len(finite)})" if finite else "-")
        misses = len(times) - len(finite)
        rows.append((f"recovery after {fault}", text + (f", {misses} never within 30 s" if misses else "")))
    rows.append(("check_invariants", f"{'holds' if report.holds else 'BROKEN'} over {report.jobs} jobs "
                                     f"({report.seconds:.2f} s)"))
    ok = (report.holds and not lost and not doubled and not valid_failed and not wrong and not undelivered
          and drain_seconds is not None)
    return rows, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--drain-timeout", type=float, default=180)
    parser.add_argument("--db", default="relayops_chaos")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--pg-restart", default=None, help="a shell command that restarts the PostgreSQL server")
    parser.add_argument("--keep", action="store_true", help="keep the database and the node logs")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**31)

    os.environ["RELAYOPS_WEBHOOK_ALLOW_PRIVATE"] = "1"  # the receiver is on loopback (the nodes inherit it)
    fresh_database(args.db)
    from django.db import connection

    from tests.proxy import Proxy
    from webhooks import services

    s = connection.settings_dict
    proxy = Proxy(s["HOST"] or "127.0.0.1", int(s["PORT"] or 5432))
    proxy.start()
    via_proxy = database_url(args.db).replace(f"@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/",
                                              f"@127.0.0.1:{proxy.port}/")
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"{args.db}-logs"
    logs.mkdir(exist_ok=True)
    env = {**os.environ, "DATABASE_URL": via_proxy, "DEBUG": "1", "RELAYOPS_CRASH_POINTS": CRASH_POINTS,
           "RELAYOPS_Q_WORKERS": str(args.workers), "RELAYOPS_LEASE_SECONDS": "3", "RELAYOPS_DRAIN_SECONDS": "5",
           "RELAYOPS_OUTBOX_CLAIM_SECONDS": "3", "RELAYOPS_SHUTDOWN_GRACE_SECONDS": "10", "LOG_LEVEL": "INFO",
           "DJANGO_Q_LOG_LEVEL": "INFO", "DJANGO_SETTINGS_MODULE": "relayops.settings"}
    nodes = [Node(f"chaos-{n}", {**env, "RELAYOPS_NODE_NAME": f"chaos-{n}"}, logs / f"chaos-{n}.log")
             for n in range(args.nodes)]
    receiver = Receiver()
    services.create_endpoint(WEBHOOK_TENANT, receiver.url, ["extraction.completed"])
    run = Run(args, random.Random(seed), nodes, proxy, receiver=receiver)
    print(f"chaos: seed {seed}, {args.nodes} nodes x {args.workers} workers, {args.jobs} jobs, "
          f"{args.seconds:.0f} s of faults, database {args.db}", flush=True)
    began = time.monotonic()
    try:
        for node in nodes:
            node.start()
        wait_ready(run)
        fault_phase(run)
        drain_seconds = wait_drained(run, args.drain_timeout)
        stopped = [node.stop() for node in nodes]
        rows, ok = verdict_rows(run, drain_seconds)
        rows.insert(5, ("graceful stop at the end (SIGTERM)", ", ".join(f"exit {code}" for code in stopped)))
        ok = ok and all(code == 0 for code in stopped)
    finally:
        for node in nodes:
            node.kill()
        proxy.stop()
        receiver.close()
    width = max(len(name) for name, _ in rows)
    print(f"\n{'what':<{width}}  figure\n{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print("\nrecovery: from the end of a fault until the node it hit (every node, for a connection kill or an "
          "outage) has all its workers looking for work again and a job was committed since")
    print(f"whole run {time.monotonic() - began:.0f} s; verdict: {'PASS' if ok else 'FAIL'}; node logs in {logs}")
    if not args.keep:
        connection.close()
        import psycopg

        with psycopg.connect(database_url("postgres"), autocommit=True) as server:
            server.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
