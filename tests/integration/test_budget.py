"""The cost ceiling per document (one job): an attempt that would start past it is not made; the job is
dead-lettered as budget_exhausted through the queue, and each attempt's spend stays on record."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pipeline import queue
from pipeline.budget import Budget, spend_of
from pipeline.errors import TransientError
from pipeline.extraction.document import Usage
from pipeline.extraction.report import Prices
from pipeline.models import Attempt, DeadLetter
from pipeline.reasons import ErrorCode
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


class CostlyFailures:
    """A model that spends 1,000 tokens per call and answers 500 every time."""

    extractor_name = "llm"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, document, checkpoint):
        self.calls += 1
        raise TransientError(ErrorCode.LLM_SERVER_ERROR, usage=Usage(model="m", input_tokens=800, output_tokens=200))


def run_until_done(clock, extractor, budget, prices=Prices()) -> list[str]:
    outcomes = []
    while (outcome := process_once("w1", extractor=extractor, clock=clock, budget=budget, prices=prices).outcome) != "idle":
        outcomes.append(outcome)
        clock.advance(600)
    return outcomes


def test_the_attempt_past_the_token_ceiling_is_not_made(clock):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(), max_attempts=10, clock=clock)
    model = CostlyFailures()
    outcomes = run_until_done(clock, model, Budget(max_tokens=2_500))
    assert outcomes == ["retry", "retry", "retry", "dead_lettered"]
    assert model.calls == 3  # 3,000 tokens spent: the fourth call would start past 2,500
    dead = DeadLetter.objects.get(job=job)
    assert (dead.reason_code, dead.error_code, dead.attempts) == ("budget_exhausted", "budget_exhausted", 4)
    spent = list(Attempt.objects.filter(job=job).order_by("fence").values_list("error_code", "input_tokens"))
    assert spent == [("llm_server_error", 800)] * 3 + [("budget_exhausted", None)]
    assert spend_of(job.pk).tokens == 3_000


def test_the_cost_ceiling_counts_priced_tokens(clock):
    job, _ = queue.enqueue("acme", "doc", 1, invoice(), max_attempts=10, clock=clock)
    prices = Prices(input_per_1k=Decimal("1.00"), output_per_1k=Decimal("2.00"))  # 1.20 per call
    model = CostlyFailures()
    outcomes = run_until_done(clock, model, Budget(max_cost=Decimal("2.00")), prices)
    assert outcomes == ["retry", "retry", "dead_lettered"] and model.calls == 2
    assert spend_of(job.pk).cost == Decimal("2.40")
    assert list(Attempt.objects.filter(job=job, cost__isnull=False).values_list("cost", flat=True)) == [
        Decimal("1.2"), Decimal("1.2")]


def test_the_budget_is_per_job_a_reprocessed_version_starts_afresh(clock):
    from dlq.services import reprocess_from_dlq
    from tests.admin.factories import member

    queue.enqueue("acme", "doc", 1, invoice(), max_attempts=10, clock=clock)
    run_until_done(clock, CostlyFailures(), Budget(max_tokens=1_000))
    dead = DeadLetter.objects.get()
    operator = member("op", "acme")
    new_job = reprocess_from_dlq(dead.pk, operator, reason="model fixed").new_job
    model = CostlyFailures()
    assert process_once("w1", extractor=model, budget=Budget(max_tokens=1_000)).outcome == "retry"  # now: v2's time
    assert model.calls == 1 and spend_of(new_job.pk).tokens == 1_000


def test_no_ceiling_means_no_check(clock):
    queue.enqueue("acme", "doc", 1, invoice(), max_attempts=3, clock=clock)
    assert run_until_done(clock, CostlyFailures(), Budget()) == ["retry", "retry", "dead_lettered"]
    assert DeadLetter.objects.get().reason_code == "max_attempts_exceeded"


def test_the_default_budget_comes_from_the_settings(settings):
    settings.RELAYOPS = {**settings.RELAYOPS, "MAX_TOKENS_PER_DOCUMENT": 5, "MAX_COST_PER_DOCUMENT": Decimal("0.5")}
    assert Budget.from_settings() == Budget(max_tokens=5, max_cost=Decimal("0.5"))
