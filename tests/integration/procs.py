"""Child processes for the real-process tests: ``python -m tests.integration.procs SCENARIO ARGS_JSON``.

Each scenario sets Django up against the database in ``DATABASE_URL`` (the test database), prints its
findings as JSON lines on stdout and exits. Starts are synchronised by a PostgreSQL advisory lock the
parent holds (``barrier``), never by sleeping.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import sys
import threading
from typing import Any


def lease_to_json(lease) -> dict[str, Any]:
    data = dict(lease.__dict__)
    data["lease_until"] = lease.lease_until.isoformat()
    data["deadline_at"] = lease.deadline_at.isoformat()
    return data


def lease_from_json(data: dict[str, Any]):
    from pipeline.queue import Lease

    return Lease(**{**data, "lease_until": dt.datetime.fromisoformat(data["lease_until"]),
                    "deadline_at": dt.datetime.fromisoformat(data["deadline_at"])})


def say(**message: Any) -> None:
    print(json.dumps(message, default=str), flush=True)


def barrier(key: int) -> None:
    """Wait until the parent releases its advisory lock on ``key``: every child starts together."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock_shared(%s)", [key])
        cursor.execute("SELECT pg_advisory_unlock_shared(%s)", [key])


def clock_at(iso: str):
    from pipeline.clock import FrozenClock

    return FrozenClock(dt.datetime.fromisoformat(iso))


def work(args: dict[str, Any]) -> None:
    """One process_once; with ``crash`` set, the injector SIGKILLs this process at that point; with
    ``claim_next``, its commit claims the next job (said as ``carried``); with ``hand_off``, its commit
    hands its event to review (said as ``handed_off``)."""
    from pipeline.crash import NO_CRASH, CrashInjector
    from pipeline.relay import commit_hand_off
    from pipeline.worker import process_once

    crash = CrashInjector.parse(args["crash"], kill=True) if args.get("crash") else NO_CRASH
    out = process_once(args["worker"], clock=clock_at(args["now"]), lease_seconds=args["lease_seconds"],
                       crash=crash, claim_next=(lambda: True) if args.get("claim_next") else None,
                       hand_off=commit_hand_off(None) if args.get("hand_off") else None)
    say(outcome=out.outcome, job_id=out.job_id, fence=out.fence, handed_off=out.handed_off,
        carried=out.carried.lease.job_id if out.carried is not None else None)


def race(args: dict[str, Any]) -> None:
    """Lease until nothing is left; commit every lease except the jobs in ``abandon`` (a crash)."""
    from pipeline import queue
    from pipeline.outbox import commit_result_with_event

    clock = clock_at(args["now"])
    abandon = set(args["abandon"])
    barrier(args["barrier"])
    leases = []
    while (lease := queue.lease_next(args["worker"], lease_seconds=30, clock=clock)) is not None:
        leases.append([lease.job_id, lease.fence, lease.lease_until.isoformat()])
        if lease.job_id not in abandon:
            commit_result_with_event(lease, {"by": args["worker"], "fence": lease.fence}, clock=clock)
    say(leases=leases)


def zombie(args: dict[str, Any]) -> None:
    """Lease one job, report it, then try each call named on stdin with that (later stale) lease."""
    from pipeline import queue
    from pipeline.errors import PermanentError
    from pipeline.outbox import commit_result_with_event
    from pipeline.reasons import ErrorCode

    clock = clock_at(args["now"])
    lease = queue.lease_next(args["worker"], lease_seconds=30, clock=clock)
    assert lease is not None
    say(lease=lease_to_json(lease))
    calls = {
        "heartbeat": lambda: queue.heartbeat(lease, lease_seconds=30, clock=clock),
        "ack": lambda: queue.ack(lease, clock=clock),
        "nack": lambda: queue.nack(lease, PermanentError(ErrorCode.DOCUMENT_MALFORMED), clock=clock),
        "release": lambda: queue.release(lease, clock=clock),
        "commit": lambda: commit_result_with_event(lease, {"by": "zombie"}, clock=clock),
    }
    for line in sys.stdin:
        name = line.strip()
        if name == "exit":
            break
        try:
            calls[name]()
        except Exception as exc:
            say(call=name, error=type(exc).__name__)
        else:
            say(call=name, error=None)


def relay(args: dict[str, Any]) -> None:
    """Publish in small batches until a claim finds nothing; report every event id published."""
    from pipeline import relay as relay_module
    from pipeline.relay import ConsumerPublisher

    class Recording(ConsumerPublisher):
        delivered: list[str] = []

        def publish(self, event) -> None:
            self.delivered.append(str(event.event_id))
            super().publish(event)

        def publish_batch(self, events, out_of_time):
            self.delivered.extend(str(event.event_id) for event in events)
            return super().publish_batch(events, out_of_time)

    publisher = Recording() if args.get("recording", True) else None  # None: the built-in, in the claim
    barrier(args["barrier"])
    marked = lost = 0
    while (report := relay_module.publish_pending(args["batch_size"], publisher=publisher)).claimed:
        marked += report.published
        lost += report.lost_claims
    say(delivered=publisher.delivered if publisher else [], marked=marked, lost_claims=lost)


def stuck(args: dict[str, Any]) -> None:
    """A qcluster worker whose job ignores the stop: it leases a job, is hurried, and never returns.

    The force-exit watchdog must release the lease and end the process (exit code 1). With
    ``hold_log_lock`` the main thread keeps the log handlers' locks, as an exception raised from a signal
    handler between a lock's acquire and its ``try`` would leave them: the watchdog must end it anyway.
    With ``hurried_inside_stop`` the hurry signal's handler runs while this thread holds the stop event's
    lock, as when it lands inside the stop handler's Event.set()."""
    import logging
    import os
    import time

    from pipeline import queue
    from pipeline.runtime import shutdown
    from pipeline.runtime.liveness import worker_id

    shutdown.FORCE_EXIT_SECONDS = args["force_after"]
    shutdown.install_worker_handlers()
    lease = queue.lease_next(worker_id())
    say(job_id=lease.job_id if lease else None, worker=worker_id())
    if args.get("hold_log_lock"):
        for handler in logging.getLogger().handlers:
            handler.acquire()
    if args.get("hurried_inside_stop"):  # the hurry signal lands while the stop handler sets its event
        with shutdown.STATE.requested._cond:
            os.kill(os.getpid(), shutdown.HURRY_SIGNAL)
            time.sleep(0.2)  # the handler runs here, in this thread, with the event's lock held
    else:
        shutdown.STATE.hurry()  # not in a drain: nothing is interrupted, as with a job stuck in C code
    while True:
        time.sleep(0.05)  # stuck; only the watchdog ends this process


def gated_work(args: dict[str, Any]) -> None:
    """One process_once whose extraction waits at the gate (an advisory lock the parent holds) before
    it returns: the parent acts on the leased job meanwhile, then opens the gate and the worker commits."""
    from pipeline.extraction.rules import invoice_extractor
    from pipeline.worker import process_once

    def extractor(document, checkpoint):
        barrier(args["gate"])
        return invoice_extractor(document, checkpoint)

    out = process_once(args["worker"], extractor=extractor, lease_seconds=args["lease_seconds"])
    say(outcome=out.outcome, job_id=out.job_id, fence=out.fence)


def forked_heartbeat(args: dict[str, Any]) -> None:
    """Fork while a lease is under a heartbeat, as django-q2 forks its workers: the child's heartbeat
    extends the child's own lease (twice; then it acks it) and nothing of the parent's, and the
    parent's heartbeat goes on. The parent gives its lease up (acks it) before the child starts, so a beat of it from the child
    would find it ended (``lease.lost`` on stderr). Each side says what it saw; the parent waits."""
    import os

    from django.db import connections

    from pipeline import queue
    from pipeline.models import Job
    from pipeline.runtime.heartbeat import THREAD_NAME, Heartbeat
    from tests.waiting import wait_for

    def beaten(job_id: int, after: dt.datetime) -> dt.datetime | None:
        until = Job.objects.values_list("lease_until", flat=True).get(pk=job_id)
        return until if until is not None and until > after else None

    def extended(lease, times: int = 1) -> bool:
        until = lease.lease_until
        for n in range(times):
            until = wait_for(functools.partial(beaten, lease.job_id, until), timeout=10,
                             what=f"beat {n + 1} of job {lease.job_id}")
        return True

    held = queue.lease_next("parent", lease_seconds=1.5)
    beat = Heartbeat(held, lease_seconds=1.5)
    beat.__enter__()
    extended(held)  # the parent's beater runs and holds a connection
    go_read, go_write = os.pipe()
    connections.close_all()  # the child opens its own: a socket is never shared across the fork
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.close(go_write)
            os.read(go_read, 1)  # the parent let go of its lease
            mine = queue.lease_next("child", lease_seconds=1.5)
            with Heartbeat(mine, lease_seconds=1.5) as own:
                say(side="child", job_id=mine.job_id, extended_twice=extended(mine, times=2),
                    beaters=sum(thread.name == THREAD_NAME for thread in threading.enumerate()))
                own.check()
            queue.ack(mine)
            status = 0
        finally:
            sys.stdout.flush()
            os._exit(status)
    beat.__exit__(None, None, None)
    queue.ack(held)
    os.write(go_write, b"x")
    _, status = os.waitpid(child, 0)
    again = queue.lease_next("parent", lease_seconds=1.5)
    with Heartbeat(again, lease_seconds=1.5):
        say(side="parent", job_id=again.job_id, child_status=status, extended=extended(again))


def footprint(args: dict[str, Any]) -> None:
    """What a cluster node's process does before and while it works (qcluster's start-up checks, the
    configured extractor and publishers, one job processed and relayed), then which of
    ``args["libraries"]`` it has imported: what only the web process or an unused feature needs stays
    out of its memory."""
    from django.core.management import get_commands, load_command_class

    from pipeline import plugins
    from pipeline import relay as relay_module
    from pipeline.worker import process_once

    qcluster = load_command_class(get_commands()["qcluster"], "qcluster")
    qcluster.startup_checks()
    extractor, publisher = plugins.configured_extractor(), plugins.configured_publisher()
    outcome = process_once(args["worker"], extractor=extractor).outcome
    published = relay_module.publish_pending(publisher=publisher).published
    say(outcome=outcome, published=published,
        imported=sorted(name for name in args["libraries"] if name in sys.modules))


SCENARIOS = {"work": work, "gated_work": gated_work, "race": race, "zombie": zombie, "relay": relay, "stuck": stuck,
             "forked_heartbeat": forked_heartbeat, "footprint": footprint}


def main() -> None:
    import django

    django.setup()
    scenario, raw = sys.argv[1], sys.argv[2]
    SCENARIOS[scenario](json.loads(raw))


if __name__ == "__main__":
    main()
