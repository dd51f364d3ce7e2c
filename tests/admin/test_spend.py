"""What an operator sees of the extraction: per attempt, the extractor, model, tokens, inference time,
cost and the failed rule, on the job page, the timeline and the dead letter; never the content."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse

from pipeline import queue
from pipeline.clock import FrozenClock
from pipeline.errors import TransientError
from pipeline.extraction import synthetic
from pipeline.extraction.document import Extraction, Usage
from pipeline.extraction.report import Prices
from pipeline.extraction.rules import invoice_extractor
from pipeline.models import DeadLetter
from pipeline.reasons import ErrorCode
from pipeline.worker import process_once
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db
PRICES = Prices(input_per_1k=Decimal("0.50"), output_per_1k=Decimal("1.50"))


class FakeModel:
    """Answers like a model that read the invoice (the rules extractor underneath), after failing once."""

    extractor_name = "llm"

    def __call__(self, document, checkpoint):
        usage = Usage(model="tiny-invoice-1", prompt_hash="ab" * 32, input_tokens=1200, output_tokens=300)
        if document.attempt == 1:
            raise TransientError(ErrorCode.LLM_SERVER_ERROR, usage=Usage(model="tiny-invoice-1", prompt_hash="ab" * 32))
        return Extraction(invoice_extractor(document, checkpoint), usage)


def test_the_job_page_and_timeline_show_each_attempts_spend_and_no_content(acme_operator):
    text = synthetic.valid(5).text
    job, _ = queue.enqueue("acme", "inv-5", 1, {"text": text, "metadata": {}})
    assert process_once("w1", extractor=FakeModel(), prices=PRICES).outcome == "retry"
    later = FrozenClock(dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5))  # past the retry's backoff
    assert process_once("w1", extractor=FakeModel(), prices=PRICES, clock=later).outcome == "committed"
    client = login(acme_operator)
    page = client.get(reverse("admin:pipeline_job_change", args=[job.pk])).content.decode()
    table = page[page.index('class="attempt-spend"'):]
    assert "llm_server_error" in table and "tiny-invoice-1" in table
    assert "1200" in table and "300" in table and "1.050000" in table  # 1.2 x 0.50 + 0.3 x 1.50
    assert "<th>queue wait</th>" in table and "<th>commit</th>" in table  # each timing its own column
    committed = job.attempts.get(fence=2)
    assert f"<td>{committed.queue_wait_seconds:.3f} s</td>" in table
    assert f"<td>{committed.commit_seconds:.3f} s</td>" in table
    timeline = client.get(reverse("admin:pipeline_job_timeline", args=[job.pk])).content.decode()
    assert "llm (tiny-invoice-1), 1200 in / 300 out tokens" in timeline and "cost 1.050000" in timeline
    for secret in (synthetic.valid(5).fields["vendor"], synthetic.valid(5).fields["invoice_number"]):
        assert secret not in page and secret not in timeline


def test_a_failed_rule_is_named_on_the_dead_letter_and_the_timeline(acme_operator):
    job, _ = queue.enqueue("acme", "bad", 1, {"text": synthetic.failing("due_after_issue", 2).text, "metadata": {}})
    assert process_once("w1").outcome == "dead_lettered"
    dead = DeadLetter.objects.get()
    assert (dead.reason_code, dead.error_code, dead.failed_rule) == ("permanent_error", "validation_failed",
                                                                     "due_after_issue")
    client = login(acme_operator)
    listing = client.get(reverse("admin:pipeline_deadletter_changelist")).content.decode()
    assert "due_after_issue" in listing
    timeline = client.get(reverse("admin:pipeline_job_timeline", args=[job.pk])).content.decode()
    assert "Attempt failed: validation_failed (rule due_after_issue)" in timeline
