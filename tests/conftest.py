"""Shared fixtures. Tests run on real PostgreSQL; see README for pointing them elsewhere."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from pipeline.clock import FrozenClock
from pipeline.extraction import synthetic


def pytest_configure(config):
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("postgresql"):
        raise pytest.UsageError("RelayOps tests run on PostgreSQL: set DATABASE_URL=postgresql://...")
    try:
        with psycopg.connect(
            host=db["HOST"] or None, port=db["PORT"] or None, user=db["USER"] or None,
            password=db["PASSWORD"] or None, dbname="postgres", connect_timeout=5, autocommit=True,
        ) as server:
            drop_abandoned_test_databases(server, settings.TEST_DATABASE_PREFIX)
    except psycopg.OperationalError as exc:
        raise pytest.UsageError(
            f"RelayOps tests need PostgreSQL at {db['HOST']}:{db['PORT']} and could not connect: "
            f"{str(exc).strip().splitlines()[0]}\n"
            "Start it (README, section Tests), or point the tests at another server with\n"
            "  DATABASE_URL=postgresql://USER:PASSWORD@HOST:PORT/relayops <the test command>"
        ) from None


def drop_abandoned_test_databases(server, prefix: str) -> None:
    """Drop the test databases of this host's runs whose process is gone (killed before teardown)."""
    from psycopg import sql

    names = server.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", [prefix]).fetchall()
    for (name,) in names:
        pid = name[len(prefix):].split("_")[0]
        if pid.isdigit() and not _alive(int(pid)):
            server.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Let Django's flush TRUNCATE the audit and review decision tables, in the test database only.

    Transactional tests (``transaction=True``, subprocesses) end with a TRUNCATE of every table, and
    the append-only triggers of those tables refuse TRUNCATE, so their teardown would fail. UPDATE and DELETE
    stay refused; a test of the TRUNCATE refusal re-enables the trigger inside its own transaction.
    """
    from django.db import connection

    from pipeline.runtime.wake_turn import path_for_database

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("ALTER TABLE dlq_auditentry DISABLE TRIGGER dlq_auditentry_no_truncate")
        cursor.execute("ALTER TABLE review_reviewdecision DISABLE TRIGGER review_reviewdecision_no_truncate")
    turn = path_for_database()  # the drains' wake turn file of this run's test database (pipeline.runtime.wake_turn)
    yield
    turn.unlink(missing_ok=True)


@pytest.fixture
def proxy():
    """A TCP proxy on loopback in front of the test database's server (tests/proxy.py): connections made
    through ``proxy.port`` can be refused, dropped or cut after a COMMIT."""
    from django.db import connection

    from tests.proxy import Proxy

    db = connection.settings_dict
    forwarder = Proxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))
    forwarder.start()
    yield forwarder
    forwarder.stop()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc))


def invoice(n: int = 1, total: str | None = None, **simulate) -> dict:
    """A valid synthetic invoice's payload (pipeline.extraction.synthetic), the same for the same ``n``;
    with ``total``, a one-line invoice for that amount. ``simulate`` asks the rules extractor to fail or
    take time."""
    payload = {"text": synthetic.valid(n, total=total).text}
    if simulate:
        payload["simulate"] = simulate
    return payload
