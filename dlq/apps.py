"""The DLQ app: reprocessing dead letters as new versions, its rate limit, and the audit of who decided what.

``ready()`` gives the metric sampler (pipeline) its count of reprocess refusals per tenant.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.apps import AppConfig


def refusals(since: dt.datetime, now: dt.datetime) -> Iterable[tuple[str, str, float]]:
    """Reprocesses the rate limit refused in (since, now], per tenant."""
    from django.db.models import Count

    from dlq.models import ReprocessRefusal

    rows = ReprocessRefusal.objects.filter(at__gt=since, at__lte=now).values("tenant").annotate(n=Count("pk"))
    return [(row["tenant"], "", float(row["n"])) for row in rows.order_by("tenant")]


class DlqConfig(AppConfig):
    name = "dlq"
    verbose_name = "Dead letters and audit"

    def ready(self) -> None:
        from pipeline.maintenance.sampler import register_source
        from pipeline.models import Metric

        register_source(Metric.REPROCESS_REFUSALS, refusals)
