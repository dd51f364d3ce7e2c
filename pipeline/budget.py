"""The cost ceiling per document: an attempt that would start past it is not made.

"Document" means one job, ``tenant:document:vN``: the ceiling bounds what RelayOps spends on its own,
across the retries of one version. A reprocess (version + 1) is an operator's audited, rate-limited
decision to spend again, and starts with a fresh budget. What an attempt spent is read from the
attempt rows (tokens and, when prices are set, cost), so a retry on another node sees it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import Coalesce

from pipeline.models import Attempt


@dataclass(frozen=True)
class Spend:
    tokens: int
    cost: Decimal


@dataclass(frozen=True)
class Budget:
    """A job's ceiling: tokens, cost, both or neither (None: no ceiling of that kind)."""

    max_tokens: int | None = None
    max_cost: Decimal | None = None

    @classmethod
    def from_settings(cls) -> Budget:
        options = settings.RELAYOPS
        return cls(options["MAX_TOKENS_PER_DOCUMENT"], options["MAX_COST_PER_DOCUMENT"])

    @property
    def limited(self) -> bool:
        return self.max_tokens is not None or self.max_cost is not None

    def exhausted(self, job_id: int) -> bool:
        """True when the job's attempts already spent the ceiling: the next attempt must not start."""
        if not self.limited:
            return False
        spent = spend_of(job_id)
        return (self.max_tokens is not None and spent.tokens >= self.max_tokens) or (
            self.max_cost is not None and spent.cost >= self.max_cost
        )


def spend_of(job_id: int) -> Spend:
    """What the job's attempts spent so far (one aggregate over its attempt rows)."""
    totals = Attempt.objects.filter(job_id=job_id).aggregate(
        input=Coalesce(Sum("input_tokens"), 0), output=Coalesce(Sum("output_tokens"), 0), cost=Sum("cost"),
    )
    return Spend(tokens=totals["input"] + totals["output"], cost=totals["cost"] or Decimal(0))
