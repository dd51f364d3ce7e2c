"""Dead letters that would fail the same way if reprocessed: a permanent reason, and nothing changed.

A reprocess copies the dead job's payload (same ``payload_hash``), so what could differ is the
extractor and its model. A dead letter whose reason is ``permanent_error`` and whose last attempt
ran the extractor (and, for ``llm``, the model) configured now will meet the same permanent error:
the admin's confirmation page and ``manage.py reprocess`` warn with how many of the selection are
in that case. Attempts record the model the server answered with; a server that names a dated
variant of the configured model counts as changed (a warning missed, never a false one).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import OuterRef, QuerySet, Subquery

from pipeline.extraction.metering import extractor_name
from pipeline.models import Attempt, DeadLetter
from pipeline.plugins import BUILTIN_EXTRACTORS, load_extractor
from pipeline.reasons import DeadLetterReason

PERMANENT_REASONS = (DeadLetterReason.PERMANENT_ERROR,)


@dataclass(frozen=True)
class Configured:
    extractor: str  # as an attempt records it
    model: str | None  # the LLM model; None: the extractor has no configurable model


def configured() -> Configured:
    spec = settings.RELAYOPS["EXTRACTOR"]
    name = spec if spec in BUILTIN_EXTRACTORS else extractor_name(load_extractor(spec))
    return Configured(name, settings.RELAYOPS.get("LLM_MODEL", "") if name == "llm" else None)


def same_failure(dead_letters: QuerySet[DeadLetter], now: Configured | None = None) -> QuerySet[DeadLetter]:
    """Those of ``dead_letters`` that would fail the same way: permanent reason, same extractor and model."""
    now = now or configured()
    last = Attempt.objects.filter(job_id=OuterRef("job_id"), ended_at__isnull=False).order_by("-fence")
    rows = dead_letters.filter(reason_code__in=PERMANENT_REASONS).annotate(
        last_extractor=Subquery(last.values("extractor")[:1]), last_model=Subquery(last.values("model_name")[:1]),
    ).filter(last_extractor=now.extractor)
    return rows.filter(last_model=now.model) if now.model is not None else rows
