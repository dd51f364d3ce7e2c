"""Wake-ups that carry no job identity: losing, repeating or replaying one is harmless.

``ring`` runs inside the caller's transaction, so a wake-up exists exactly when the row that
caused it committed: a PostgreSQL NOTIFY (delivered at commit) for drains that are listening, and,
when the cluster is enabled, a django-q2 "kick" task that starts a drain if none is running.
"""

from __future__ import annotations

from django.db import connection

JOBS = "relayops_jobs"
OUTBOX = "relayops_outbox"
CHANNELS = (JOBS, OUTBOX)


def ring(channel: str) -> None:
    if channel not in CHANNELS:
        raise ValueError(f"unknown doorbell channel {channel!r}")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [channel])
    from pipeline import kicks

    kicks.kick(channel)
