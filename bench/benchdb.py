"""The benchmarks' database: a fresh, migrated one on the server of ``DATABASE_URL``, and Django on it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/relayops"


def database_url(db: str) -> str:
    """``DATABASE_URL`` (or the default) with its database name replaced by ``db``."""
    return f"{os.environ.get('DATABASE_URL', DEFAULT_URL).rsplit('/', 1)[0]}/{db}"


def use_database(db: str, **env: str) -> None:
    """Point this process's settings at ``db`` (plus ``env``) and set Django up."""
    os.environ.update(DATABASE_URL=database_url(db), LOG_LEVEL="WARNING", DJANGO_SETTINGS_MODULE="relayops.settings",
                      **env)
    os.environ.setdefault("SECRET_KEY", "relayops-bench-only-" + "0123456789abcdefghijklmnopqrstuvwxyz")
    import django

    django.setup()


def fresh_database(db: str, **env: str) -> None:
    """Drop and create ``db``, point Django at it, and migrate."""
    import psycopg

    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')
    use_database(db, **env)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def wait(predicate, timeout: float, what: str, interval: float = 0.002):
    """Poll ``predicate`` until it returns something true (returned), or exit after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(interval)
    return value


def stop(process: "subprocess.Popen[bytes]", grace: float) -> None:
    """SIGTERM to a started subprocess's main PID; its whole session SIGKILLed if it outlives ``grace``."""
    import signal
    import subprocess

    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
