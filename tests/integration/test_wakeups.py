"""Wake-ups on real PostgreSQL: a NOTIFY reaches listeners at commit, and a listener connects where
RELAYOPS_LISTEN_DATABASE_URL says (behind a transaction pool: straight to PostgreSQL), checked at start."""

from __future__ import annotations

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

from pipeline.checks import listen_database
from pipeline.runtime import wakeups


def listen_url(url: str) -> override_settings:
    return override_settings(RELAYOPS={**settings.RELAYOPS, "LISTEN_DATABASE_URL": url})


def url_of_this_database(port: int | None = None) -> str:
    s = connection.settings_dict
    return f"postgresql://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{port or s['PORT'] or 5432}/{s['NAME']}"


@pytest.mark.django_db(transaction=True)
def test_a_ring_wakes_the_listeners_when_its_transaction_commits():
    listener = wakeups.Listener([wakeups.JOBS])
    try:
        with transaction.atomic():
            wakeups.ring(wakeups.JOBS)
            wakeups.ring(wakeups.OUTBOX)  # not listened to
            assert listener.wait(0.2) == set()  # not before the commit
        assert listener.wait(5) == {wakeups.JOBS}
        assert listener.wait(0.1) == set()
    finally:
        listener.close()


@pytest.mark.django_db(transaction=True)
def test_the_listener_connects_where_the_listen_url_says(proxy):
    with listen_url(url_of_this_database(proxy.port)):
        listener = wakeups.Listener([wakeups.JOBS])
    try:
        with transaction.atomic():
            wakeups.ring(wakeups.JOBS)  # on Django's connection, straight to the server
        assert listener.wait(5) == {wakeups.JOBS}
        proxy.stop()  # the listener's connection goes through the proxy, Django's does not
        with pytest.raises(psycopg.OperationalError):
            listener.wait(5)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
    finally:
        listener.close()


@pytest.mark.django_db(transaction=True)
def test_listeners_are_named_in_pg_stat_activity_unless_the_url_names_them():
    def names() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
                           "AND query LIKE 'LISTEN %%' ORDER BY application_name")
            return [name for (name,) in cursor.fetchall()]

    listeners = [wakeups.Listener([wakeups.JOBS])]
    with listen_url(url_of_this_database() + "?application_name=node-7-listen"):
        listeners.append(wakeups.Listener([wakeups.JOBS]))
    try:
        assert names() == ["node-7-listen", wakeups.APPLICATION_NAME]
    finally:
        for listener in listeners:
            listener.close()


def errors() -> list[tuple[str, str]]:
    return [(message.id, message.msg) for message in listen_database()]


@pytest.mark.parametrize("url", [
    "pgsql://postgres@127.0.0.1:5432/relayops",
    "host=127.0.0.1 dbname=relayops",
    "postgresql://postgres:s3cret@127.0.0.1:5432/",
    "postgresql://postgres:s3cret@127.0.0.1:5432/relayops?no_such_option=1",
])
def test_a_listen_url_that_is_not_a_postgresql_url_of_a_database_is_refused_without_echoing_it(url):
    with listen_url(url):
        [(check_id, message)] = errors()
    assert check_id == "relayops.E030" and "RELAYOPS_LISTEN_DATABASE_URL" in message
    assert "s3cret" not in message and "relayops?" not in message


def test_a_listen_url_naming_another_database_is_a_warning_and_its_own_database_passes():
    assert errors() == []  # unset: the listeners use DATABASE_URL
    with listen_url(url_of_this_database().rsplit("/", 1)[0] + "/elsewhere"):
        [(check_id, message)] = errors()
    assert check_id == "relayops.W030" and "'elsewhere'" in message
    with listen_url(url_of_this_database() + "?sslmode=disable"):
        assert errors() == []
