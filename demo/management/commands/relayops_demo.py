"""``relayops_demo``: migrate, create a demo operator and auditor, enqueue a dozen invoices, then run
the cluster and the admin together until Ctrl-C (``./run demo``).

``--setup-only`` stops after seeding; ``--no-serve`` runs the cluster without the admin until every
demo job has finished, prints the outcome and stops (the smoke test uses both on SQLite).
"""

from __future__ import annotations

import io
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from demo import scenarios
from pipeline.models import Job, OutboxEvent
from pipeline.states import TERMINAL_STATUSES

ROOT = Path(__file__).resolve().parents[3]  # the project: manage.py's folder
USERS = (("demo-operator", False), ("demo-auditor", True))  # (username, auditor?)


class Command(BaseCommand):
    help = "Set up the demo (database, users, a dozen invoices) and run the cluster and the admin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--setup-only", action="store_true", help="migrate, create users, seed; then exit")
        parser.add_argument("--no-serve", action="store_true",
                            help="no admin: run the cluster until the demo jobs finish, then stop")
        parser.add_argument("--port", type=int, default=8000, help="the admin's port (default 8000)")
        parser.add_argument("--timeout", type=float, default=90.0, help="--no-serve: give up after this long")

    def handle(self, *args: Any, **options: Any) -> None:
        where = "PostgreSQL" if connection.vendor == "postgresql" else f"SQLite at {settings.DATABASES['default']['NAME']}"
        self.stdout.write(f"RelayOps demo on {where}")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("  database migrated")
        credentials = [self._user(name, auditor) for name, auditor in USERS]
        seeded = scenarios.seed()
        for item, job, created in seeded:
            self.stdout.write(f"  {'queued ' if created else 'found  '} {job.idempotency_key:<24} -> {item.expect}")
        if options["setup_only"]:
            self._print_credentials(credentials)
            return
        if options["no_serve"]:
            self._run_until_done([job for _, job, _ in seeded], options["timeout"])
            return
        self._serve(credentials, options["port"])

    def _user(self, username: str, auditor: bool) -> tuple[str, str, str]:
        """Create or reset a demo user through tenancy's create_operator."""
        password = secrets.token_urlsafe(12)
        args = [username, *[arg for t in scenarios.TENANTS for arg in ("--tenant", t)], f"--password={password}"]
        call_command("create_operator", *args, *(["--auditor"] if auditor else []), stdout=io.StringIO())
        return ("auditor" if auditor else "operator", username, password)

    def _print_credentials(self, credentials: list[tuple[str, str, str]]) -> None:
        for role, username, password in credentials:
            self.stdout.write(f"  {role:<8} username: {username:<14} password: {password}")

    def _run_until_done(self, jobs: list[Job], timeout: float) -> None:
        cluster = _spawn([sys.executable, "manage.py", "qcluster"])
        try:
            deadline = time.monotonic() + timeout
            while not _finished(jobs):
                if cluster.poll() is not None:
                    raise CommandError(f"qcluster exited with {cluster.returncode}")
                if time.monotonic() > deadline:
                    raise CommandError(f"the demo jobs did not finish within {timeout:.0f} s")
                time.sleep(0.25)
        finally:
            _stop(cluster)
        for job in Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk"):
            self.stdout.write(f"  {job.idempotency_key:<24} {job.status:<14} attempts={job.attempt}")
        self.stdout.write("demo finished: every job is terminal and every event published")

    def _serve(self, credentials: list[tuple[str, str, str]], port: int) -> None:
        cluster = _spawn([sys.executable, "manage.py", "qcluster"])
        admin = _spawn([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"])
        self.stdout.write(f"\nOpen http://127.0.0.1:{port}/admin/ and sign in as:")
        self._print_credentials(credentials)
        self.stdout.write("Watch the queues from another terminal: ./run relayops_status --watch")
        self.stdout.write("Press Ctrl-C to stop the cluster and the admin.\n")
        previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            while cluster.poll() is None and admin.poll() is None:
                time.sleep(0.5)
            self.stderr.write("a demo process exited on its own; stopping the other")
        except KeyboardInterrupt:
            self.stdout.write("\nstopping: the cluster finishes or releases its jobs first ...")
        finally:
            _stop(cluster)  # a second Ctrl-C meanwhile makes qcluster stop at once
            _stop(admin, grace=5.0)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        self.stdout.write("stopped cleanly")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    """A child in its own session: the terminal's Ctrl-C reaches only us, and we stop it the safe way."""
    return subprocess.Popen(argv, cwd=ROOT, env=os.environ.copy(), start_new_session=True)


def _stop(process: subprocess.Popen[bytes], grace: float | None = None) -> None:
    """SIGTERM to the main PID only (a group signal can hang qcluster), then SIGKILL the group.
    Interrupted again meanwhile, it sends a second SIGTERM: qcluster's "stop at once"."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        try:
            process.wait(grace if grace is not None else settings.RELAYOPS["SHUTDOWN_GRACE_SECONDS"] + 15)
        except KeyboardInterrupt:
            process.send_signal(signal.SIGTERM)
            process.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _finished(jobs: list[Job]) -> bool:
    ids = [job.pk for job in jobs]
    done = Job.objects.filter(pk__in=ids, status__in=TERMINAL_STATUSES).count() == len(ids)
    return done and not OutboxEvent.objects.filter(published_at__isnull=True).exists()
