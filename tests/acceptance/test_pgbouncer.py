"""Behind PgBouncer in transaction mode: a real cluster's Django connections go through a private
PgBouncer with fewer server connections than the cluster has clients, its drains' LISTEN connections
straight to PostgreSQL (RELAYOPS_LISTEN_DATABASE_URL), and every job still takes effect exactly once.

Skipped where PgBouncer is not installed (.ci/run installs it from Debian's packages).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from pipeline import queue
from pipeline.models import Job, OutboxEvent, Review
from pipeline.runtime import wakeups
from pipeline.states import TERMINAL_STATUSES
from tests import pgbouncer as bouncer
from tests.acceptance.conftest import WORKERS, database_url, effects
from tests.conftest import invoice
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pgbouncer(tmp_path: Path) -> Iterator[bouncer.PgBouncer]:
    """A PgBouncer in transaction mode in front of this test's database, stopped at teardown."""
    if bouncer.BINARY is None:
        pytest.skip("pgbouncer is not installed (Debian: apt-get install pgbouncer; .ci/run installs it)")
    s = connection.settings_dict
    # One server connection for the cluster's clients (its two workers' Django connections, and a
    # heartbeat thread's while a job outlives a third of its lease): every transaction may run on a
    # connection another client used before.
    pooler = bouncer.PgBouncer(tmp_path, database=s["NAME"], host=s["HOST"] or "127.0.0.1",
                               port=int(s["PORT"] or 5432), user=s["USER"], password=s["PASSWORD"], pool_size=1)
    pooler.start()
    try:
        yield pooler
    finally:
        pooler.stop()


def direct_listeners() -> list[int]:
    """The client ports of this database's backends parked on LISTEN by a drain's listener."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT client_port FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s AND state = 'idle' AND query LIKE 'LISTEN %%'",
            [wakeups.APPLICATION_NAME])
        return [port for (port,) in cursor.fetchall()]


def ours(rows: list[dict], database: str) -> list[dict]:
    return [row for row in rows if row["database"] == database]


def all_done(jobs: list[Job]) -> bool:
    pending = Job.objects.filter(pk__in=[j.pk for j in jobs]).exclude(status__in=TERMINAL_STATUSES)
    return not pending.exists() and not OutboxEvent.objects.filter(published_at__isnull=True).exists()


def test_drains_behind_a_transaction_pool_take_every_job_once(pgbouncer, start_cluster):
    cluster = start_cluster(DATABASE_URL=pgbouncer.url, RELAYOPS_LISTEN_DATABASE_URL=database_url())
    database = pgbouncer.database
    # One LISTEN connection per drain, straight to PostgreSQL: none of them is one of PgBouncer's.
    listeners = wait_for(lambda: len(ports := direct_listeners()) == WORKERS and ports, timeout=15,
                         what=f"{WORKERS} drains parked on LISTEN")
    pooled_ports = {row["local_port"] for row in ours(pgbouncer.show("SERVERS"), database)}
    assert not set(listeners) & pooled_ports

    clean = [queue.enqueue("acme", f"doc-{n}", 1, invoice(n))[0] for n in range(20)]
    # Long enough for the heartbeat thread to renew the lease (2 s) through the pool mid-job.
    slow = [queue.enqueue("acme", f"slow-{n}", 1, invoice(50 + n, work_seconds=1.5))[0] for n in range(2)]
    flaky, _ = queue.enqueue("globex", "flaky", 1, invoice(90, transient_failures=1))
    broken, _ = queue.enqueue("globex", "broken", 1, {"text": "not an invoice"})
    jobs = [*clean, *slow, flaky, broken]

    wait_for(lambda: all_done(jobs), timeout=60, what="every job terminal and its event published")
    clients = ours(pgbouncer.show("CLIENTS"), database)
    servers = ours(pgbouncer.show("SERVERS"), database)
    [pool] = ours(pgbouncer.show("POOLS"), database)
    [stats] = ours(pgbouncer.show("STATS"), database)
    assert cluster.stop() == 0

    statuses = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("document_id", "status"))
    assert statuses.pop("broken") == "dead_lettered"
    assert set(statuses.values()) == {"succeeded"}
    for job in [*clean, *slow, flaky]:
        assert effects(job.idempotency_key) == (1, 1, 1), job.idempotency_key
    assert effects(broken.idempotency_key) == (0, 0, 0)
    assert Review.objects.count() == len(jobs) - 1
    assert "drain.failed" not in cluster.log()  # no drain met a database error behind the pool

    # The cluster's queries went through the pool, in transaction mode, its clients sharing fewer
    # server connections than they are.
    assert pool["pool_mode"] == "transaction"
    assert stats["total_xact_count"] >= 2 * len(jobs)  # at least a claim and a commit each
    assert len(servers) <= pgbouncer.pool_size < len(clients)
