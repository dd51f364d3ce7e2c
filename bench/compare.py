"""RelayOps beside PostgreSQL's own limit, in one run on one server: pgbench, drains, latency, CPU, statements.

Usage: ./run bench compare [--smoke] [--json PATH] [--clients 1,2,4,8] [--workers 1,2,4] [--jobs 3000]
       [--seconds 10] [--rate 150] [--latency-jobs 600] [--log-format auto|console|json] [--db relayops_bench_compare]

1. The limit: RelayOps' own transaction per job behind a backlog, captured as RelayOps issues it
   (``commit_result_with_event``'s completion, result, event handed off to review and published with
   the next job's claim, the call a drain makes while more jobs wait with the default publishers and no
   webhook endpoint; a client's first run claims alone first, as ``lease_next``),
   written as a pgbench custom script (each row feeds the next statement through ``\\gset``; extended
   protocol, so the key is a bound parameter) and run with ``pgbench -n -M extended -c N -j N -T seconds``
   for each ``--clients`` against a table seeded with queued jobs. One script run = one job.
2. RelayOps end to end: ``--jobs`` invoices enqueued one by one through ``pipeline.queue.enqueue`` inside
   one transaction (so the drain meets the whole backlog at its commit), drained by a real
   ``manage.py qcluster`` with each ``--workers`` count through lease, extraction, validation, commit,
   relay and the built-in review consumer; timed from that commit until every job has its review and
   no event is left unpublished.
3. Latency: ``--latency-jobs`` jobs enqueued at a steady ``--rate`` per second on an idle 2-worker
   cluster: enqueue called -> job leased (``leased_at``), and commit -> published (outbox
   ``created_at`` -> ``published_at``); p50 and p95 (nearest rank); again at ``--headroom`` (0.5) of the
   2-worker drain's measured jobs/s, a rate the cluster can keep up with.
4. One job at a time (``--single-jobs``): each job enqueued on an idle 2-worker cluster and reviewed
   before the next; its statements per job beside a backlog's.
CPU per job: utime+stime from /proc of the qcluster process tree and of the PostgreSQL backends
connected to the benchmark database (found by their process titles), sampled every 0.1 s; a backend
that exits between samples loses its last 0.1 s. Statements per job: counted client-side in every
Django connection of the cluster (bench/statement_counter.py; the drains' LISTEN connections are not
Django's and not counted); commits per job: ``pg_stat_database.xact_commit``. pg_stat_statements is not
used (the JSON records whether the server preloads it). RSS per qcluster process. The clusters log at
``--log-level`` (INFO) in ``--log-format`` (auto: their log is a file, so JSON, as a supervised node's).
Prints a table with each figure's ratio to the pgbench limit of the same run and writes JSON (default
bench/results/compare-<UTC time>.json, git-ignored). ``--smoke`` is a ~30-second run with tiny sizes
(CI runs it: tests/acceptance/test_bench_compare.py). ``--nodes 2`` drains with two clusters side by side.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import statement_counter  # bench/ is on sys.path when run as a script
from benchdb import ROOT, database_url, fresh_database, stop, wait
from latency import figures

RESULTS = ROOT / "bench" / "results"
TENANT = "bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGETS = {"ratio": 0.25, "start_p50_ms": 3.0, "start_p95_ms": 10.0, "publish_p50_ms": 5.0, "cpu_ms_per_job": 2.5,
           "rss_mb": 60.0}
CAPTURE_JOB_ID = 900_000_001  # the captured job's id and fence: values no other literal in its statements has
CAPTURE_FENCE = 7_340_033
BACKEND_TITLE = re.compile(r"postgres: (?:\S+: )?\S+ (\S+) ")
PIPELINE_TABLES = ("pipeline_job", "pipeline_outboxevent", "pipeline_consumedevent", "pipeline_drainpresence",
                   "pipeline_queuedepthsample")


# --- /proc ---------------------------------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a live process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def _tree(root: int) -> set[int]:
    """``root`` and its descendants."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            parents[int(entry)] = stat[0]
    found, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _backends(db: str, exclude: set[int]) -> set[int]:
    """PostgreSQL backends connected to ``db`` (titles 'postgres: [CLUSTER: ]USER DB HOST(PORT) STATE')."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            title = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if (match := BACKEND_TITLE.match(title)) and match.group(1) == db:
            pids.add(int(entry))
    return pids


def _proc_mb(path: str, field: str) -> float | None:
    """A ``field:`` line of a /proc file, in MB; None once the process is gone."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def rss_mb(pid: int) -> float | None:
    return _proc_mb(f"/proc/{pid}/status", "VmRSS")


def pss_mb(pid: int) -> float | None:
    """Proportional set size: the process's private pages plus its share of the pages it shares (a
    forked worker shares most of its parent's), so a node's workers' PSS add up to what they cost."""
    return _proc_mb(f"/proc/{pid}/smaps_rollup", "Pss")


class CpuMeter:
    """CPU seconds spent by two groups of processes (a tree, a database's backends) between start and stop."""

    def __init__(self, db: str, tree_roots: list[int], exclude: set[int]) -> None:
        self.db, self.roots, self.exclude = db, tree_roots, exclude
        self.first: dict[int, float] = {}
        self.last: dict[str, dict[int, float]] = {"tree": {}, "postgres": {}}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        tree = set().union(*(_tree(root) for root in self.roots))
        groups = {"tree": tree, "postgres": _backends(self.db, self.exclude)}
        for group, pids in groups.items():
            for pid in pids:
                if (stat := _stat(pid)) is not None:
                    self.last[group][pid] = stat[1]

    def start(self) -> None:
        self._sample()
        self.first = {pid: cpu for group in self.last.values() for pid, cpu in group.items()}
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self._sample()
        return {group: sum(cpu - self.first.get(pid, 0.0) for pid, cpu in pids.items())
                for group, pids in self.last.items()}


# --- the database ------------------------------------------------------------------------------------------

def _counters(db: str) -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated,"
                       " tup_deleted FROM pg_stat_database WHERE datname = %s", [db])
        names = [c[0] for c in cursor.description]
        return dict(zip(names, cursor.fetchone()))


def _counters_flushed(db: str) -> dict[str, int]:
    """The counters once the backends that exited have reported theirs."""
    time.sleep(1.0)
    return _counters(db)


def _pg_stat_statements() -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_preload_libraries")
        return "pg_stat_statements" in cursor.fetchone()[0]


def _reset() -> None:
    """Empty the pipeline's tables (every table referencing a job goes with it). The benchmark's own
    throwaway database: the audit's append-only trigger is bypassed for this one statement."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(f"TRUNCATE {', '.join(PIPELINE_TABLES)} RESTART IDENTITY CASCADE")
        cursor.execute("SET session_replication_role = DEFAULT")


def _vacuum(tables: tuple[str, ...] = PIPELINE_TABLES) -> None:
    """VACUUM ANALYZE, then a CHECKPOINT: every measured run starts just after one, so each pays for the
    full-page images of its first write to every page (a checkpoint falling inside some runs and not
    others made its PostgreSQL CPU per job differ from run to run)."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("CHECKPOINT")


def _invoice(n: int) -> Any:
    from pipeline.extraction import synthetic

    return synthetic.valid(n).payload  # a real invoice: extracted, validated, committed, published, reviewed


# --- 1. pgbench ----------------------------------------------------------------------------------------------

def _captured(run) -> list[tuple[str, Any, bool]]:  # noqa: ANN001
    """The statements ``run()`` sends through Django's connection, with their parameters and whether
    they ran inside a transaction block (else each was its own transaction, in autocommit)."""
    from django.db import connection

    seen: list[tuple[str, Any, bool]] = []

    def wrapper(execute, sql, params, many, context):  # noqa: ANN001
        seen.append((sql, params, connection.in_atomic_block))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        run()
    return seen


def _literal(sql: str, params: Any, marks: dict[Any, str]) -> str:
    """``sql`` with its parameters inlined; a parameter equal to a key of ``marks`` becomes that text."""
    import psycopg
    from django.db import connection

    def mark(value: Any) -> Any:
        for key, text in marks.items():
            same_kind = type(value) is type(key) or (isinstance(value, int) and isinstance(key, int))  # psycopg's Int8
            if same_kind and not isinstance(value, bool) and value == key:
                return f"PGBENCH_MARK<{text}>"
        return value

    if isinstance(params, dict):
        params = {name: mark(value) for name, value in params.items()}
    elif params is not None:
        params = [mark(value) for value in params]
    connection.ensure_connection()
    text = psycopg.ClientCursor(connection.connection).mogrify(sql, params)
    text = re.sub(r"'PGBENCH_MARK<([^>]*)>'(::[a-z]+)?", r"\1", text)
    # pgbench reads ':name' anywhere as a variable: inside a JSON literal a colon before a letter (the
    # key "tenant:document:v1" in an event's payload) is written as JSON's own escape, the same value.
    return re.sub(r"'\{[^']*'", lambda m: re.sub(r":(?=[A-Za-z_])", r"\\u003a", m.group(0)), text)


def capture_script() -> tuple[str, dict[str, int]]:
    """A pgbench script of one job's transaction as RelayOps issues it behind a backlog, and its statement counts.

    Real jobs are leased (``lease_next``) and committed with the next one's claim
    (``commit_result_with_event`` with ``claim_next``, as a drain does while more jobs wait) while every
    statement is recorded. The claim's row feeds the commit through ``\\gset``; the commit's row (the next
    job's lease) feeds the next script run's commit: a client claims alone once, at its first run, as a
    drain does at its first job. The event id becomes a fresh ``gen_random_uuid()``. The timestamps stay as
    captured: the seeded jobs are visible before them and due long after.
    """
    from django.db import connection

    from pipeline import queue
    from pipeline.outbox import commit_result_with_event
    from pipeline.plugins import configured_publisher
    from pipeline.relay import commit_hand_off

    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('pipeline_job', 'id'), %s, false)", [CAPTURE_JOB_ID])
    job, _ = queue.enqueue(TENANT, "capture", 1, _invoice(0))
    queue.enqueue(TENANT, "capture-next", 1, _invoice(1))  # what the commit's claim takes
    with connection.cursor() as cursor:  # a throwaway job in a throwaway database: its fence made unmistakable
        cursor.execute("UPDATE pipeline_job SET fence = %s WHERE id = %s", [CAPTURE_FENCE - 1, job.pk])
    leases = []
    claim = _captured(lambda: leases.append(queue.lease_next("pgbench-capture")))
    lease = leases[0]
    assert lease is not None and lease.job_id == CAPTURE_JOB_ID and lease.fence == CAPTURE_FENCE, lease
    outcomes = []
    commit = _captured(lambda: outcomes.append(commit_result_with_event(
        lease, {"invoice_number": "1", "total": "1"}, claim_next=queue.claim_params("pgbench-capture"),
        hand_off=commit_hand_off(configured_publisher()))))
    assert outcomes[0].claimed is not None, "the capture's commit claimed no next job"
    assert outcomes[0].handed_off, "the capture's commit did not hand its event off"
    marks = {CAPTURE_JOB_ID: ":id", CAPTURE_FENCE: ":fence", lease.idempotency_key: ":idempotency_key",
             outcomes[0].event_id: "gen_random_uuid()", outcomes[0].event_id.hex: "gen_random_uuid()",
             str(outcomes[0].event_id): "gen_random_uuid()"}
    (claim_sql, claim_params, claim_in_block), = claim
    (commit_sql, commit_params, commit_in_block), = commit
    assert not (claim_in_block or commit_in_block), "the claim and the commit are each one autocommit statement"
    lines = ["-- RelayOps' claim, as lease_next issued it: a client's first run only (pgbench -D carried=0)",
             r"\if :carried = 0",
             _literal(claim_sql, claim_params, {}).strip() + r" \gset",
             r"\set carried 1",
             r"\endif",
             "-- RelayOps' commit transaction behind a backlog, as commit_result_with_event issued it: the job's",
             "-- commit and the next job's claim, whose row is the next run's job",
             _literal(commit_sql, commit_params, marks).strip() + r" \gset"]
    script = "\n".join(" ".join(line.split()) if not line.startswith("--") else line for line in lines) + "\n"
    return script, {"claim": len(claim), "commit": len(commit)}


def seed(jobs: int) -> None:
    """``jobs`` queued copies of the template job (a real enqueued invoice), visible before the captured claim."""
    from django.db import connection

    from pipeline.models import Job

    columns = [f.column for f in Job._meta.concrete_fields if f.column != "id"]
    replaced = {"document_id": "'pgb-' || g", "idempotency_key": f"'{TENANT}:pgb-' || g || ':v1'",
                "status": "'queued'", "fence": "0", "attempt": "0", "lease_expiries": "0", "lease_owner": "''",
                "lease_until": "NULL", "leased_at": "NULL", "finished_at": "NULL", "last_error_code": "''",
                "visible_at": "t.visible_at - interval '1 hour'"}
    values = ", ".join(replaced.get(c, f"t.{c}") for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO pipeline_job ({', '.join(columns)}) SELECT {values} "
                       f"FROM bench_template t, generate_series(1, %s) g", [jobs])


def run_pgbench(db: str, script: Path, clients: int, seconds: float) -> dict[str, Any]:
    from django.db import connection

    pgbench = shutil.which("pgbench") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench"))), None)
    if pgbench is None:
        raise SystemExit("pgbench not found: install PostgreSQL's client package (postgresql-client)")
    _reset()
    seed(int(seconds * 4000 * max(1, clients / 2)) + 2000)
    _vacuum(("pipeline_job",))
    before = _counters(db)
    meter = CpuMeter(db, [], {connection.connection.info.backend_pid})
    meter.start()
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    out = subprocess.run([str(pgbench), "-n", "-M", "extended", "-D", "carried=0", "-f", str(script), "-c", str(clients),
                          "-j", str(clients), "-T", str(max(1, round(seconds))), database_url(db)],
                         capture_output=True, text=True, env=env)
    cpu = meter.stop()
    after = _counters_flushed(db)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    done = re.search(r"number of transactions actually processed: (\d+)", out.stdout)
    if out.returncode != 0 or tps is None or done is None:
        raise SystemExit(f"pgbench failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    jobs = int(done.group(1))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pipeline_job WHERE status = 'succeeded'")
        succeeded = cursor.fetchone()[0]
    if succeeded < jobs:  # every script run must finish its job, or it measured less than RelayOps' commit
        raise SystemExit(f"pgbench ran {jobs} scripts but only {succeeded} jobs succeeded:\n{script.read_text()}")
    return {"clients": clients, "seconds": round(seconds), "jobs_per_s": float(tps.group(1)), "jobs": jobs,
            "succeeded_rows": succeeded, "commits_per_job": (after["xact_commit"] - before["xact_commit"]) / jobs,
            "postgres_cpu_ms_per_job": 1000 * cpu["postgres"] / jobs}


def pgbench_section(db: str, clients: list[int], seconds: float, workdir: Path) -> dict[str, Any]:
    from django.db import connection

    script, statements = capture_script()
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_template")
        cursor.execute("CREATE TABLE bench_template AS SELECT * FROM pipeline_job WHERE status = 'queued' LIMIT 0")
    from pipeline import queue

    template, _ = queue.enqueue(TENANT, "template", 1, _invoice(1))
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO bench_template SELECT * FROM pipeline_job WHERE id = %s", [template.pk])
    path = workdir / "relayops_job.sql"
    path.write_text(script)
    runs = []
    for n in clients:
        runs.append(run_pgbench(db, path, n, seconds))
        print(f"  pgbench {n} client(s): {runs[-1]['jobs_per_s']:,.0f} jobs/s "
              f"(PostgreSQL CPU {runs[-1]['postgres_cpu_ms_per_job']:.2f} ms/job)", flush=True)
    return {"script": script, "statements": statements, "runs": runs,
            "limit_jobs_per_s": max(r["jobs_per_s"] for r in runs)}


# --- 2. and 3. a real cluster ---------------------------------------------------------------------------------

class Cluster:
    """``manage.py qcluster`` with ``workers`` workers on the benchmark database, its statements counted."""

    def __init__(self, workers: int, node: str, workdir: Path, log_level: str) -> None:
        self.node, self.workers = node, workers
        self.counter = workdir / f"{node}.statements"
        statement_counter.create(self.counter)
        self.log = open(workdir / f"{node}.log", "wb")
        env = {**os.environ, "RELAYOPS_Q_WORKERS": str(workers), "RELAYOPS_NODE_NAME": node,
               "LOG_LEVEL": log_level, "DJANGO_Q_LOG_LEVEL": "WARNING"}
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "statement_counter.py"), str(self.counter), "qcluster"],
            cwd=ROOT, env=env, start_new_session=True, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_parked(self) -> None:
        from pipeline.models import DrainPresence

        wait(lambda: self.process.poll() is not None or DrainPresence.objects.filter(
            node=self.node, gone_at__isnull=True).count() >= self.workers, 60, f"{self.workers} parked drains",
            interval=0.05)
        if self.process.poll() is not None:
            raise SystemExit(f"qcluster exited: see {self.log.name}")
        time.sleep(0.5)  # let the drains finish their first look and park on LISTEN

    def statements(self) -> int:
        return sum(statement_counter.read(self.counter).values())

    def rss(self) -> list[dict[str, Any]]:
        """Each process of the cluster, a worker (it runs a drain: ``DrainPresence.worker`` is 'node:pid')
        or django-q2's own (sentinel, monitor, pusher, guard), with its resident memory."""
        from pipeline.models import DrainPresence

        workers = {int(w.rsplit(":", 1)[1]) for w in DrainPresence.objects.filter(
            node=self.node, gone_at__isnull=True).values_list("worker", flat=True)}
        return [{"pid": pid, "role": "worker" if pid in workers else "django-q2", "rss_mb": round(mb, 1),
                 "pss_mb": round(pss_mb(pid) or 0.0, 1)}
                for pid in sorted(_tree(self.process.pid)) if (mb := rss_mb(pid)) is not None]

    def stop(self) -> None:
        stop(self.process, 60)
        self.log.close()


def _progress() -> tuple[int, int]:
    """(reviews, events not yet published), in one statement."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT (SELECT count(*) FROM pipeline_review),"
                       " (SELECT count(*) FROM pipeline_outboxevent WHERE published_at IS NULL)")
        return cursor.fetchone()


def drain_run(db: str, workers: int, jobs: int, workdir: Path, log_level: str, nodes: int = 1) -> dict[str, Any]:
    """``jobs`` enqueued, then drained by ``nodes`` clusters of ``workers`` workers each."""
    from django.db import connection, transaction

    from pipeline import queue

    _reset()
    _vacuum()
    clusters: list[Cluster] = []
    try:
        for node in range(nodes):
            clusters.append(Cluster(workers, f"bench-drain-{workers}-{node}", workdir, log_level))
        for cluster in clusters:
            cluster.wait_parked()
        with transaction.atomic():  # the drains meet the whole backlog at this commit
            began = time.perf_counter()
            for n in range(jobs):
                queue.enqueue(TENANT, f"doc-{n}", 1, _invoice(n))
            enqueue_s = time.perf_counter() - began
            before, statements = _counters(db), sum(c.statements() for c in clusters)
            meter = CpuMeter(db, [c.process.pid for c in clusters], {connection.connection.info.backend_pid})
            meter.start()
        started = time.perf_counter()
        polls = 0

        def finished() -> bool:
            nonlocal polls
            polls += 1
            reviews, unpublished = _progress()
            return reviews >= jobs and unpublished == 0

        wait(finished, max(60.0, jobs / 5), f"{jobs} reviews", interval=0.02)
        elapsed = time.perf_counter() - started
        cpu = meter.stop()
        statements = sum(c.statements() for c in clusters) - statements
        rss = [process for c in clusters for process in c.rss()]
    finally:
        for cluster in clusters:
            cluster.stop()
    after = _counters_flushed(db)  # backends report their counters as they exit (or once a second at most)
    commits = after["xact_commit"] - before["xact_commit"] - polls - 2  # the bench's own: polls, the counter reads
    return {
        "workers": workers, "nodes": nodes, "jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed,
        "enqueue_jobs_per_s": jobs / enqueue_s,
        "cpu_ms_per_job": {"workers": 1000 * cpu["tree"] / jobs, "postgres": 1000 * cpu["postgres"] / jobs,
                           "total": 1000 * (cpu["tree"] + cpu["postgres"]) / jobs},
        "statements_per_job": statements / jobs, "commits_per_job": commits / jobs,
        "rows_per_job": {k: (after[k] - before[k]) / jobs for k in ("tup_inserted", "tup_updated", "tup_deleted")},
        "processes": rss,
    }


def latency_section(db: str, jobs: int, rate: float, workdir: Path, log_level: str) -> dict[str, Any]:
    from pipeline import queue
    from pipeline.models import Job, OutboxEvent

    _reset()
    _vacuum()
    warmup = max(2, jobs // 20)
    cluster = Cluster(2, "bench-latency", workdir, log_level)
    try:
        cluster.wait_parked()
        statements = cluster.statements()
        sent: dict[int, dt.datetime] = {}
        began = time.perf_counter()
        for n in range(warmup + jobs):
            time.sleep(max(0.0, began + n / rate - time.perf_counter()))
            before = dt.datetime.now(dt.timezone.utc)
            job, _ = queue.enqueue(TENANT, f"lat-{n}", 1, _invoice(n))
            if n >= warmup:
                sent[job.pk] = before
        achieved = (warmup + jobs) / (time.perf_counter() - began)
        wait(lambda: _progress() == (warmup + jobs, 0), 120, "the latency jobs' reviews", interval=0.05)
        statements = cluster.statements() - statements
    finally:
        cluster.stop()
    leased = dict(Job.objects.filter(pk__in=sent).values_list("pk", "leased_at"))
    keys = dict(Job.objects.filter(pk__in=sent).values_list("idempotency_key", "pk"))
    start_ms = [(leased[pk] - at).total_seconds() * 1000 for pk, at in sent.items()]
    publish_ms = [(e.published_at - e.created_at).total_seconds() * 1000
                  for e in OutboxEvent.objects.filter(idempotency_key__in=keys, published_at__isnull=False)]
    return {"rate_per_s": rate, "achieved_per_s": achieved, "jobs": jobs, "warmup": warmup,
            "statements_per_job": statements / (warmup + jobs),
            "start_ms": figures(start_ms), "publish_ms": figures(publish_ms)}


def one_at_a_time(jobs: int, workdir: Path, log_level: str) -> dict[str, Any]:
    """Statements per job when each job meets an idle 2-worker cluster: enqueue one, wait for its review,
    let the drains park again (every wake-up then costs what it costs), repeat."""
    from pipeline import queue

    _reset()
    cluster = Cluster(2, "bench-single", workdir, log_level)
    try:
        cluster.wait_parked()
        statements = cluster.statements()
        for n in range(jobs):
            queue.enqueue(TENANT, f"one-{n}", 1, _invoice(n))
            wait(lambda: _progress() == (n + 1, 0), 30, f"job {n}'s review", interval=0.005)
            time.sleep(0.05)  # the drains park on LISTEN again
        statements = cluster.statements() - statements
    finally:
        cluster.stop()
    return {"jobs": jobs, "statements_per_job": statements / jobs}


# --- the report ----------------------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
    memory = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cores": os.cpu_count(), "cpu": model, "memory_gb": round(int(memory.split()[1]) / 1024 / 1024, 1),
            "postgresql": version, "python": platform.python_version(), "load_average": os.getloadavg()}


def table(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, value, ratio to the pgbench limit or target) rows."""
    pg = result["pgbench"]
    limit = pg["limit_jobs_per_s"]
    by_clients = {r["clients"]: r for r in pg["runs"]}
    rows = []
    for r in pg["runs"]:
        rows.append((f"pgbench, RelayOps' job transaction, {r['clients']} client(s)", f"{r['jobs_per_s']:,.0f} jobs/s",
                     f"{r['jobs_per_s'] / limit:.2f} of limit"))
    def who(r: dict[str, Any]) -> str:
        nodes = r.get("nodes", 1)
        return f"{r['workers']} worker(s)" if nodes == 1 else f"{nodes} nodes x {r['workers']} worker(s)"

    for r in result["relayops"]:
        same = by_clients.get(r["workers"] * r.get("nodes", 1))
        vs_same = f"; {r['jobs_per_s'] / same['jobs_per_s']:.2f} of pgbench {same['clients']}c" if same else ""
        rows.append((f"RelayOps drain, {who(r)}", f"{r['jobs_per_s']:,.0f} jobs/s",
                     f"{r['jobs_per_s'] / limit:.3f} of limit{vs_same} (target >= {TARGETS['ratio']})"))
    for r in result["relayops"]:
        pg_same = by_clients.get(r["workers"] * r.get("nodes", 1))
        pg_cpu = f"; pgbench's PostgreSQL {pg_same['postgres_cpu_ms_per_job']:.2f}" if pg_same else ""
        cpu = r["cpu_ms_per_job"]
        rows.append((f"CPU per job, {who(r)}: workers + PostgreSQL",
                     f"{cpu['workers']:.2f} + {cpu['postgres']:.2f} = {cpu['total']:.2f} ms",
                     f"{cpu['total'] / TARGETS['cpu_ms_per_job']:.2f}x target {TARGETS['cpu_ms_per_job']} ms{pg_cpu}"))
        pg_commits = f"pgbench {pg_same['commits_per_job']:.1f} commits" if pg_same else ""
        rows.append((f"statements / commits per job, {who(r)}",
                     f"{r['statements_per_job']:.1f} / {r['commits_per_job']:.1f}",
                     f"pgbench script {pg['statements']['commit']} statement per job "
                     f"(+{pg['statements']['claim']} at a client's first); {pg_commits}"))
        workers = sorted(p["rss_mb"] for p in r["processes"] if p["role"] == "worker") or [0.0]
        others = sorted(p["rss_mb"] for p in r["processes"] if p["role"] != "worker")
        pss = sorted(p.get("pss_mb", 0.0) for p in r["processes"] if p["role"] == "worker")
        rows.append((f"RSS per worker process, {who(r)}", ", ".join(f"{mb:.0f}" for mb in workers) + " MB",
                     f"max {max(workers) / TARGETS['rss_mb']:.2f}x target {TARGETS['rss_mb']:.0f} MB; PSS "
                     + ", ".join(f"{mb:.0f}" for mb in pss) + f" MB; django-q2's own {len(others)}: "
                     + ", ".join(f"{mb:.0f}" for mb in others) + " MB"))
    single, backlog = result.get("one_at_a_time"), next(
        (r for r in result["relayops"] if r["workers"] * r.get("nodes", 1) == 2), None)
    if single:
        versus = f"{single['statements_per_job'] / backlog['statements_per_job']:.2f}x a 2-worker backlog's " \
                 "(target <= 2)" if backlog else ""
        rows.append((f"statements per job, one job at a time ({single['jobs']} jobs, 2 workers)",
                     f"{single['statements_per_job']:.1f}", versus))
    for lat in result["latency"]:
        at = f"{lat['achieved_per_s']:.0f} jobs/s ({lat['why']})"
        rows.append((f"start latency at {at}, 2 workers (p50 / p95)",
                     f"{lat['start_ms']['median']:.1f} / {lat['start_ms']['p95']:.1f} ms",
                     f"{lat['start_ms']['median'] / TARGETS['start_p50_ms']:.1f}x / "
                     f"{lat['start_ms']['p95'] / TARGETS['start_p95_ms']:.1f}x targets 3 / 10 ms"))
        rows.append((f"publish latency at {at}, commit -> published (p50 / p95)",
                     f"{lat['publish_ms']['median']:.1f} / {lat['publish_ms']['p95']:.1f} ms",
                     f"{lat['publish_ms']['median'] / TARGETS['publish_p50_ms']:.1f}x target p50 5 ms"))
        backlog = next((r for r in result["relayops"] if r["workers"] * r.get("nodes", 1) == 2), None)
        versus = f"{lat['statements_per_job'] / backlog['statements_per_job']:.2f}x a 2-worker backlog's (target <= 2)" \
            if backlog else ""
        rows.append((f"statements per job at {at}", f"{lat['statements_per_job']:.1f}", versus))
    return rows


def print_table(rows: list[tuple[str, str, str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for name, value, ratio in rows:
        print(f"  {name:<{widths[0]}}  {value:>{widths[1]}}  {ratio}")


def _csv(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, about 30 seconds (CI)")
    parser.add_argument("--json", type=Path, help="where to write the JSON (default bench/results/compare-*.json)")
    parser.add_argument("--clients", type=_csv, default=[1, 2, 4, 8])
    parser.add_argument("--workers", type=_csv, default=[1, 2, 4])
    parser.add_argument("--nodes", type=int, default=1, help="clusters draining side by side, each with --workers")
    parser.add_argument("--jobs", type=int, default=3000, help="backlog per drain run")
    parser.add_argument("--seconds", type=float, default=10, help="each pgbench run")
    parser.add_argument("--rate", type=float, default=150, help="latency: jobs enqueued per second")
    parser.add_argument("--headroom", type=float, default=0.5,
                        help="latency again at this fraction of the 2-worker drain's measured jobs/s (0: skip)")
    parser.add_argument("--latency-jobs", type=int, default=600, help="0: no latency runs")
    parser.add_argument("--single-jobs", type=int, default=100, help="jobs run one at a time (0: skip)")
    parser.add_argument("--log-level", default="INFO", help="the cluster's LOG_LEVEL (production's default)")
    parser.add_argument("--log-format", default="auto", choices=["auto", "console", "json"],
                        help="the cluster's RELAYOPS_LOG_FORMAT (default auto, production's: its log is a file, "
                             "so JSON lines)")
    parser.add_argument("--db", default="relayops_bench_compare")
    args = parser.parse_args(argv)
    if args.smoke:
        args.clients, args.workers, args.jobs, args.seconds = [1, 2], [2], 40, 1
        args.latency_jobs, args.rate, args.headroom, args.single_jobs = 20, 50, 0, 5

    began = time.monotonic()
    os.environ["RELAYOPS_LOG_FORMAT"] = args.log_format  # the clusters inherit it
    fresh_database(args.db, DJANGO_Q_LOG_LEVEL="WARNING")
    result: dict[str, Any] = {"started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                              "smoke": args.smoke, "machine": machine(),
                              "log": {"level": args.log_level, "format": args.log_format,  # auto: a file, so JSON
                                      "rendered_as": "console" if args.log_format == "console" else "json"},
                              "statement_source": "client-side count of Django's statements; commits from "
                              "pg_stat_database", "pg_stat_statements_preloaded": _pg_stat_statements()}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="relayops-compare-") as tmp:
        workdir = Path(tmp)
        print(f"1. pgbench, RelayOps' commit-and-claim transaction per job ({', '.join(map(str, args.clients))} clients, "
              f"{args.seconds:g} s each)", flush=True)
        result["pgbench"] = pgbench_section(args.db, args.clients, args.seconds, workdir)
        load.append(os.getloadavg()[0])
        print(f"2. RelayOps end to end, {args.jobs} jobs enqueued then drained by qcluster", flush=True)
        result["relayops"] = []
        for workers in args.workers:
            result["relayops"].append(drain_run(args.db, workers, args.jobs, workdir, args.log_level, args.nodes))
            r = result["relayops"][-1]
            print(f"  {args.nodes} node(s) x {workers} worker(s): {r['jobs_per_s']:,.0f} jobs/s, CPU {r['cpu_ms_per_job']['total']:.2f} ms/job,"
                  f" {r['statements_per_job']:.1f} statements and {r['commits_per_job']:.1f} commits per job",
                  flush=True)
            load.append(os.getloadavg()[0])
        rates = [(args.rate, "as asked")] if args.latency_jobs > 0 else []
        capacity = next((r["jobs_per_s"] for r in result["relayops"] if r["workers"] * r["nodes"] == 2), None)
        if args.headroom and capacity and rates:
            rates.append((round(args.headroom * capacity, 1), f"{args.headroom:g} of the 2-worker drain"))
        result["latency"] = []
        for rate, why in rates:
            print(f"3. latency: {args.latency_jobs} jobs at {rate:g}/s ({why}) on an idle 2-worker cluster", flush=True)
            result["latency"].append({**latency_section(args.db, args.latency_jobs, rate, workdir, args.log_level),
                                      "why": why})
            load.append(os.getloadavg()[0])
        if args.single_jobs > 0:
            print(f"4. one job at a time: {args.single_jobs} jobs, each on an idle 2-worker cluster", flush=True)
            result["one_at_a_time"] = one_at_a_time(args.single_jobs, workdir, args.log_level)
            load.append(os.getloadavg()[0])
    result["load_average_1m_during"] = {"min": min(load), "max": max(load), "samples": load}
    result["seconds"] = time.monotonic() - began
    rows = table(result)
    result["table"] = [{"figure": a, "value": b, "ratio": c} for a, b, c in rows]
    m = result["machine"]
    print(f"\nOne run, one server: {m['cores']} cores, {m['memory_gb']} GB, PostgreSQL {m['postgresql']}, "
          f"load average {min(load):.1f}-{max(load):.1f} during the run ({result['seconds']:.0f} s); the clusters "
          f"log at {args.log_level}, format {args.log_format}")
    print_table(rows)
    path = args.json or RESULTS / f"compare-{result['started_at'].replace(':', '')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nJSON: {path}")
    return result


if __name__ == "__main__":
    main()
