"""django-q2's broker in RelayOps' cluster holds no task: the pusher's poll asks the database nothing,
and a django-q2 task enqueued by mistake is refused at once, naming what to use instead."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ

from pipeline.runtime.broker import DrainsOnly

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_cluster_s_broker_is_the_one_without_a_queue():
    assert isinstance(get_broker(), DrainsOnly)


def test_the_pusher_s_poll_asks_the_database_nothing(monkeypatch):
    monkeypatch.setattr(Conf, "POLL", 0.01)  # the wait between polls, shortened for the test
    broker = get_broker()
    with CaptureQueriesContext(connection) as queries:
        assert [broker.dequeue() for _ in range(3)] == [None, None, None]
        assert (broker.queue_size(), broker.lock_size(), broker.ping()) == (0, 0, True)
    assert queries.captured_queries == []


def test_a_django_q2_task_is_refused_with_what_to_use_instead():
    from django_q.tasks import async_task

    with pytest.raises(ImproperlyConfigured, match="pipeline.queue.enqueue"):
        async_task("math.floor", 1.5)
    assert not OrmQ.objects.exists()
