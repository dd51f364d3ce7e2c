"""django-q2's broker for a cluster that hosts drains only (``Q_CLUSTER["broker_class"]``).

RelayOps' workers never read django-q2's task queue (pipeline.runtime.cluster), so the broker holds no
task: the pusher's poll waits without asking the database anything (the ORM broker sent it a query
every poll interval, from a connection of its own on every node), and a django-q2 task enqueued by
mistake (``async_task``) is refused at once, naming why, instead of waiting in a queue no one reads.
The cluster's statistics go to django-q2's cache as with any broker (``qinfo`` and ``qmonitor`` see them
only with a cache shared between processes; the default local-memory cache is not).
"""

from __future__ import annotations

import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django_q.brokers import Broker
from django_q.conf import Conf


class DrainsOnly(Broker):
    """No task queue: nothing to enqueue, nothing to hand the workers."""

    @staticmethod
    def get_connection(list_key: str | None = None) -> None:
        return None

    def enqueue(self, task: Any) -> None:
        raise ImproperlyConfigured(
            "RelayOps' qcluster runs drains only and takes no django-q2 task (async_task, schedules): "
            "enqueue documents with pipeline.queue.enqueue or the ingest API instead.")

    def dequeue(self) -> None:
        time.sleep(Conf.POLL)  # the pusher's wait between polls; nothing ever comes
        return None

    def queue_size(self) -> int:
        return 0

    def lock_size(self) -> int:
        return 0

    def purge_queue(self) -> None:
        return None

    def delete_queue(self) -> None:
        return None

    def delete(self, task_id: Any) -> None:
        return None

    def acknowledge(self, task_id: Any) -> None:
        return None

    def fail(self, task_id: Any) -> None:
        return None

    def ping(self) -> bool:
        return True

    def info(self) -> str:
        return "none: RelayOps' drains only"
