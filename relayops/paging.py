"""A paginator for admin lists over big tables: no exact COUNT(*) over millions of rows per page view.

An unfiltered list counts from PostgreSQL's statistics (pg_class.reltuples) once the table is big;
a filtered list counts exactly up to EXACT_LIMIT rows and past that takes the planner's estimate.
Small tables, and SQLite, are counted exactly.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet

# The planner's row estimate for a whole table, kept by VACUUM and ANALYZE (-1: never analysed).
TABLE_ESTIMATE = "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%(table)s)"

EXACT_LIMIT = 10_000


def table_estimate(queryset: QuerySet[Any]) -> int:
    """PostgreSQL's estimate of the rows in ``queryset``'s table; -1 when it has none."""
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(TABLE_ESTIMATE, {"table": queryset.model._meta.db_table})
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else -1


def plan_estimate(queryset: QuerySet[Any]) -> int:
    """The planner's estimate of the rows ``queryset`` returns (EXPLAIN, no execution)."""
    plan = json.loads(queryset.order_by().explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])


class EstimatedCountPaginator(Paginator):
    """Counts exactly while that is cheap, estimates past ``exact_limit``; ``estimated`` says which."""

    exact_limit = EXACT_LIMIT

    @cached_property
    def estimated(self) -> bool:
        return self._count_and_kind[1]

    @cached_property
    def count(self) -> int:
        return self._count_and_kind[0]

    @cached_property
    def _count_and_kind(self) -> tuple[int, bool]:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return len(queryset), False
        if connections[queryset.db].vendor != "postgresql":
            return queryset.count(), False
        if not queryset.query.where and not queryset.query.distinct:
            estimate = table_estimate(queryset)
            if estimate > self.exact_limit:
                return estimate, True
            return queryset.count(), False
        capped = queryset.order_by()[: self.exact_limit + 1].count()
        if capped <= self.exact_limit:
            return capped, False
        return max(plan_estimate(queryset), self.exact_limit + 1), True
