"""``relayops_demo``: migrate, create a demo operator and auditor and an API key per demo tenant,
ingest a dozen invoices through the HTTP API, then run the cluster and the server (admin and API)
together until Ctrl-C (``./run demo``), printing a ``curl`` line that ingests one more.

The rules extractor runs by default; with ``RELAYOPS_LLM_BASE_URL`` set (and no ``RELAYOPS_EXTRACTOR``)
the cluster runs the LLM extractor instead, and the simulated flaky-model scenarios are left out.
``--setup-only`` stops after ingesting (through a server on an ephemeral port of this process);
``--no-serve`` then runs the cluster without the server until every demo job has finished, prints the
outcome and stops (the smoke test uses both on SQLite).
"""

from __future__ import annotations

import io
import os
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

from demo import frontdoor, scenarios
from pipeline.models import Job, OutboxEvent
from pipeline.states import TERMINAL_STATUSES
from tenancy.services import generate_password

ROOT = Path(__file__).resolve().parents[3]  # the project: manage.py's folder
USERS = (("demo-operator", False), ("demo-auditor", True))  # (username, auditor?)


class Command(BaseCommand):
    help = "Set up the demo (database, users, API keys, a dozen invoices) and run the cluster and the server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--setup-only", action="store_true", help="migrate, create users, seed; then exit")
        parser.add_argument("--no-serve", action="store_true",
                            help="no admin: run the cluster until the demo jobs finish, then stop")
        parser.add_argument("--port", type=int, default=8000, help="the server's port: admin and API (default 8000)")
        parser.add_argument("--timeout", type=float, default=90.0, help="--no-serve: give up after this long")

    def handle(self, *args: Any, **options: Any) -> None:
        where = "PostgreSQL" if connection.vendor == "postgresql" else f"SQLite at {settings.DATABASES['default']['NAME']}"
        self.stdout.write(f"RelayOps demo on {where}")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("  database migrated")
        credentials = [self._user(name, auditor) for name, auditor in USERS]
        extractor = self._choose_extractor()
        keys = frontdoor.fresh_keys()
        self.stdout.write(f"  API keys made: {', '.join(sorted(keys))} (create more: ./run create_api_key)")
        if options["setup_only"] or options["no_serve"]:
            with frontdoor.local_server() as url:
                job_ids = self._ingest(url, keys, extractor)
            if options["setup_only"]:
                self._print_credentials(credentials)
            else:
                self._run_until_done(job_ids, options["timeout"])
            return
        self._serve(credentials, keys, extractor, options["port"])

    def _choose_extractor(self) -> str:
        """rules, or llm when a model's URL is set and no extractor is named; the cluster inherits it."""
        named = os.environ.get("RELAYOPS_EXTRACTOR")
        extractor = named or ("llm" if settings.RELAYOPS["LLM_BASE_URL"] else "rules")
        os.environ["RELAYOPS_EXTRACTOR"] = extractor
        detail = f" ({settings.RELAYOPS['LLM_MODEL']} at {settings.RELAYOPS['LLM_BASE_URL']})" if extractor == "llm" else ""
        self.stdout.write(f"  extractor: {extractor}{detail}")
        return extractor

    def _ingest(self, url: str, keys: dict[str, str], extractor: str) -> list[int]:
        """The documents through the API; the simulated scenarios in-process (rules extractor only)."""
        self.stdout.write(f"  ingesting through {url}/api/v1/documents:")
        job_ids = []
        for posted in frontdoor.post_all(url, keys, scenarios.front_door()):
            self._line(posted.status == 201, posted.key, f"HTTP {posted.status}", posted.item.expect)
            job_ids.append(posted.job_id)
        if extractor == "rules":
            for item, job, created in scenarios.seed_simulated():
                self._line(created, job.idempotency_key, "in-process", item.expect)
                job_ids.append(job.pk)
        return job_ids

    def _line(self, created: bool, key: str, how: str, expect: str) -> None:
        self.stdout.write(f"  {'queued ' if created else 'found  '} {key:<24} {how:<10} -> {expect}")

    def _user(self, username: str, auditor: bool) -> tuple[str, str, str]:
        """Create or reset a demo user through tenancy's create_operator."""
        password = generate_password()
        # --password=VALUE: a generated password may start with "-", which argparse would take for an option
        args = [username, *[arg for t in scenarios.TENANTS for arg in ("--tenant", t)], f"--password={password}"]
        call_command("create_operator", *args, *(["--auditor"] if auditor else []), stdout=io.StringIO())
        return ("auditor" if auditor else "operator", username, password)

    def _print_credentials(self, credentials: list[tuple[str, str, str]]) -> None:
        for role, username, password in credentials:
            self.stdout.write(f"  {role:<8} username: {username:<14} password: {password}")

    def _run_until_done(self, job_ids: list[int], timeout: float) -> None:
        cluster = _spawn([sys.executable, "manage.py", "qcluster"])
        try:
            deadline = time.monotonic() + timeout
            while not _finished(job_ids):
                if cluster.poll() is not None:
                    raise CommandError(f"qcluster exited with {cluster.returncode}")
                if time.monotonic() > deadline:
                    raise CommandError(f"the demo jobs did not finish within {timeout:.0f} s")
                time.sleep(0.25)
        finally:
            _stop(cluster)
        for job in Job.objects.filter(pk__in=job_ids).order_by("pk"):
            self.stdout.write(f"  {job.idempotency_key:<24} {job.status:<14} attempts={job.attempt}")
        self.stdout.write("demo finished: every job is terminal and every event published")

    def _serve(self, credentials: list[tuple[str, str, str]], keys: dict[str, str], extractor: str, port: int) -> None:
        cluster = _spawn([sys.executable, "manage.py", "qcluster"])
        admin = _spawn([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"])
        previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                frontdoor.wait_until_serving(url, admin)
            except RuntimeError as exc:
                raise CommandError(f"{exc}; try another --port") from None
            self._ingest(url, keys, extractor)
            self.stdout.write(f"\nOpen {url}/admin/ and sign in as:")
            self._print_credentials(credentials)
            self.stdout.write(f"Review the extracted invoices, oldest first, as an operator: {url}/admin/review/next/")
            self.stdout.write("Ingest one more invoice through the API (run it twice: the second answers 200):")
            self.stdout.write("  " + frontdoor.curl_line(url, keys["acme"], scenarios.one_more()))
            self.stdout.write(f"Then follow its job: curl -sS {url}/api/v1/jobs/<job_id> -H 'Authorization: Bearer <key>'")
            self.stdout.write(f"The API's OpenAPI schema: {url}/api/v1/openapi.json (docs: {url}/api/v1/docs)")
            self.stdout.write("Watch the queues from another terminal: ./run relayops_status --watch")
            self.stdout.write("Press Ctrl-C to stop the cluster and the server.\n")
            self.stdout.flush()
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


def _finished(ids: list[int]) -> bool:
    done = Job.objects.filter(pk__in=ids, status__in=TERMINAL_STATUSES).count() == len(ids)
    return done and not OutboxEvent.objects.filter(published_at__isnull=True).exists()
