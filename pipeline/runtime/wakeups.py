"""Wake-ups that carry no job identity: losing, repeating or replaying one is harmless.

``ring`` runs inside the caller's transaction, so a wake-up exists exactly when the row that caused
it committed: a PostgreSQL NOTIFY, delivered at commit to the drains listening. Every worker process
keeps a drain parked (pipeline.runtime.host), so nothing else needs waking; a missed NOTIFY costs at
most a drain's poll interval. ``Listener`` is the other end: a drain's own autocommit connection
waiting on the NOTIFYs.

A LISTEN lives on a session, so behind a pooler in transaction mode (PgBouncer) the listener must not
share the job path's connection parameters: ``RELAYOPS_LISTEN_DATABASE_URL`` sends it straight to
PostgreSQL (or to a session-mode pool) while Django's connection goes through the pooler
(docs/scaling.md, "PgBouncer"). NOTIFYs reach only listeners on the same database.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import connection

from pipeline import sql
from relayops.errors import InvalidInputError

JOBS = "relayops_jobs"
OUTBOX = "relayops_outbox"
CHANNELS = (JOBS, OUTBOX)
CONNECT_TIMEOUT_SECONDS = 5  # a database that does not answer fails the drain, which starts again
APPLICATION_NAME = "relayops-listener"  # how the listeners show in pg_stat_activity (unless the URL names one)


def _check_channel(channel: str) -> None:
    if channel not in CHANNELS:
        raise InvalidInputError("channel", f"unknown wake-up channel {channel!r}")


def connect_params() -> dict[str, Any]:
    """Where a listener connects: ``RELAYOPS_LISTEN_DATABASE_URL`` when set (libpq parses it: its
    query options, e.g. ``sslmode``, apply), else Django's own parameters for the default database."""
    from psycopg.conninfo import conninfo_to_dict

    url = settings.RELAYOPS["LISTEN_DATABASE_URL"]
    params: dict[str, Any] = conninfo_to_dict(url) if url else connection.get_connection_params()
    params.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    params.setdefault("application_name", APPLICATION_NAME)
    return params


def ring(channel: str) -> None:
    """NOTIFY ``channel`` in the caller's transaction (SQLite has no NOTIFY: its drains poll)."""
    _check_channel(channel)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_notify(%s, {sql.NOTIFY_PAYLOAD})", [channel])


class Listener:
    """LISTENs on ``channels`` on a dedicated autocommit connection (never Django's, never pooled;
    ``connect_params`` says where).

    Open it *before* looking for work: a NOTIFY committed after the LISTEN is never missed, and one
    committed before it left a row that the first look finds.
    """

    def __init__(self, channels: Iterable[str]) -> None:
        import psycopg

        self.channels = tuple(channels)
        for channel in self.channels:
            _check_channel(channel)
        self._conn = psycopg.connect(**connect_params(), autocommit=True)
        for channel in self.channels:
            self._conn.execute(f'LISTEN "{channel}"')  # names are our constants, checked above
        self.payloads: dict[str, set[str]] = {}  # what the last wake-up's NOTIFYs carried, by channel

    @classmethod
    def open(cls, channels: Iterable[str]) -> Listener | None:
        """A listener on PostgreSQL; None elsewhere (SQLite has no NOTIFY: callers poll)."""
        if connection.vendor != "postgresql":
            return None
        return cls(channels)

    def wait(self, timeout: float) -> set[str]:
        """Block up to ``timeout`` seconds for a wake-up; return the channels rung (empty on timeout).

        Wake-ups already queued on the connection are all consumed, so a burst of NOTIFYs costs one
        wake-up, not one per row.
        """
        notes = list(self._conn.notifies(timeout=max(timeout, 0.0), stop_after=1))
        if notes:
            notes += self._conn.notifies(timeout=0.0)
        self.payloads = {}
        for note in notes:
            self.payloads.setdefault(note.channel, set()).add(note.payload)
        return set(self.payloads)

    def close(self) -> None:
        self._conn.close()
