"""The per-tenant reprocess rate limit: the pure window arithmetic, the service, the lock, a real race."""

from __future__ import annotations

import datetime as dt
import threading

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from dlq.models import AuditEntry, ReprocessRefusal
from dlq.ratelimit import LOCK_NAMESPACE, ReprocessLimit, check_reprocess_allowed
from dlq.services import reprocess_from_dlq
from pipeline.clock import FrozenClock
from pipeline.errors import ReprocessRateLimitedError
from pipeline.models import Job
from tests.admin import factories

T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)
HOUR = dt.timedelta(hours=1)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("limit, recent, now, expected", [
    (3, [], at(0), None),
    (3, [at(20), at(10)], at(30), None),  # two of three used
    (3, [at(20), at(10), at(0)], at(30), 3570),  # the oldest of the three leaves at 3600
    (1, [at(0)], at(3599.5), 1),  # never less than a second
    (2, [at(50), at(40)], at(60), 3580),  # the limit-th newest decides, not the oldest overall
])
def test_retry_after_is_when_the_limit_th_newest_leaves_the_window(limit, recent, now, expected):
    assert ReprocessLimit(limit, HOUR).retry_after(recent, now) == expected


@pytest.mark.parametrize("name, value", [
    ("REPROCESS_LIMIT", 0), ("REPROCESS_LIMIT", -1), ("REPROCESS_LIMIT", "20"), ("REPROCESS_LIMIT", True),
    ("REPROCESS_WINDOW_SECONDS", 0), ("REPROCESS_WINDOW_SECONDS", 1.5),
])
def test_a_bad_setting_is_a_configuration_error(settings, name, value):
    settings.RELAYOPS = {**settings.RELAYOPS, name: value}
    with pytest.raises(ImproperlyConfigured, match=name):
        ReprocessLimit.from_settings()


def test_the_defaults_are_twenty_an_hour(settings):
    settings.RELAYOPS = {k: v for k, v in settings.RELAYOPS.items() if not k.startswith("REPROCESS_")}
    assert ReprocessLimit.from_settings() == ReprocessLimit(20, HOUR)


@pytest.fixture
def limit_three(settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 3, "REPROCESS_WINDOW_SECONDS": 3600}


@pytest.mark.django_db
def test_the_service_allows_n_per_window_then_refuses_with_the_wait(limit_three):
    clock = FrozenClock(T0)
    dead = [factories.dead_letter("acme", f"doc-{n}", clock=clock) for n in range(5)]
    for n in range(3):
        assert reprocess_from_dlq(dead[n].pk, "script", clock=clock).created
        clock.advance(10)
    with pytest.raises(ReprocessRateLimitedError) as refused:
        reprocess_from_dlq(dead[3].pk, "script", reason="one more", clock=clock)
    assert (refused.value.tenant, refused.value.retry_after_seconds) == ("acme", 3570)
    assert "try again in 3570 s" in str(refused.value)
    # The refused reprocess left nothing behind but its refusal.
    assert AuditEntry.objects.count() == 3
    assert not Job.objects.filter(document_id="doc-3", operation_version=2).exists()
    refusal = ReprocessRefusal.objects.get()
    assert (refusal.at, refusal.operator, refusal.dead_letter_id, refusal.retry_after_seconds) == (
        clock.now(), "script", dead[3].pk, 3570)
    clock.advance(3570)  # the first reprocess leaves the window
    assert reprocess_from_dlq(dead[3].pk, "script", clock=clock).created
    with pytest.raises(ReprocessRateLimitedError):
        reprocess_from_dlq(dead[4].pk, "script", clock=clock)
    assert ReprocessRefusal.objects.count() == 2


@pytest.mark.django_db
def test_tenants_have_separate_limits(limit_three):
    clock = FrozenClock(T0)
    acme = [factories.dead_letter("acme", f"doc-{n}", clock=clock) for n in range(4)]
    globex = factories.dead_letter("globex", "doc-0", clock=clock)
    for dead in acme[:3]:
        reprocess_from_dlq(dead.pk, "script", clock=clock)
    with pytest.raises(ReprocessRateLimitedError):
        reprocess_from_dlq(acme[3].pk, "script", clock=clock)
    assert reprocess_from_dlq(globex.pk, "script", clock=clock).created


@pytest.mark.django_db
def test_repeating_a_reprocess_is_free_even_at_the_limit(limit_three):
    clock = FrozenClock(T0)
    dead = [factories.dead_letter("acme", f"doc-{n}", clock=clock) for n in range(3)]
    first = [reprocess_from_dlq(d.pk, "script", clock=clock) for d in dead]
    again = reprocess_from_dlq(dead[0].pk, "script", clock=clock)
    assert not again.created and again.new_job.pk == first[0].new_job.pk
    assert ReprocessRefusal.objects.count() == 0


@pytest.mark.django_db
def test_the_check_holds_the_tenants_lock_until_the_transaction_ends(limit_three):
    """While one reprocess of acme is open, no other connection may take acme's lock; globex's is free."""
    params = connection.get_connection_params()
    with transaction.atomic():
        check_reprocess_allowed("acme", T0, operator="script")
        with psycopg.connect(**params, autocommit=True) as other:
            def try_lock(tenant: str) -> bool:
                row = other.execute(
                    "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", (LOCK_NAMESPACE, tenant)
                ).fetchone()
                assert row is not None
                return bool(row[0])

            assert try_lock("acme") is False
            assert try_lock("globex") is True


@pytest.mark.django_db(transaction=True)
def test_the_check_refuses_to_run_outside_a_transaction(limit_three):
    with pytest.raises(RuntimeError, match="inside the reprocess transaction"):
        check_reprocess_allowed("acme", T0, operator="script")


@pytest.mark.django_db(transaction=True)
def test_concurrent_reprocesses_never_overshoot_the_limit(limit_three):
    """Eight operators reprocess eight dead letters of one tenant at the same instant: three win."""
    dead = [factories.dead_letter("acme", f"doc-{n}") for n in range(8)]
    start = threading.Barrier(len(dead))
    outcomes: list[str] = []

    def reprocess(dead_id: int) -> None:
        try:
            start.wait(timeout=30)
            reprocess_from_dlq(dead_id, f"operator-{dead_id}")
            outcomes.append("created")
        except ReprocessRateLimitedError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=reprocess, args=(d.pk,)) for d in dead]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["created"] * 3 + ["refused"] * 5
    assert AuditEntry.objects.filter(tenant="acme").count() == 3
    assert ReprocessRefusal.objects.filter(tenant="acme").count() == 5
