"""``qcluster`` with ``RELAYOPS_EXTRACTOR=llm``: the drains call the model the settings point at (a
fake OpenAI-compatible server on loopback), honour its Retry-After, and every job takes effect once."""

from __future__ import annotations

import json
import threading

import pytest
from werkzeug import Request, Response

from pipeline import queue
from pipeline.extraction import synthetic
from pipeline.models import Attempt, Job, OutboxEvent
from pipeline.states import TERMINAL_STATUSES
from tests.acceptance.conftest import effects
from tests.integration.fake_llm import MODEL, PATH, completion, fake_llm  # noqa: F401  (fixture)
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]
INVOICES = [synthetic.valid(f"llm-{n}") for n in range(4)]


def test_the_cluster_runs_the_llm_extractor_the_settings_name(start_cluster, fake_llm):
    by_text = {invoice.text: invoice for invoice in INVOICES}
    busy_once = threading.Event()

    def model(request: Request) -> Response:
        text = json.loads(request.data)["messages"][1]["content"].split("\n\n", 1)[1]
        if text == INVOICES[0].text and not busy_once.is_set():  # the first call for this one: come back later
            busy_once.set()
            return Response("{}", status=503, headers={"Retry-After": "2"}, content_type="application/json")
        return Response(json.dumps(completion(json.dumps(by_text[text].fields))), content_type="application/json")

    fake_llm.server.expect_request(PATH, method="POST").respond_with_handler(model)
    cluster = start_cluster(RELAYOPS_EXTRACTOR="llm", RELAYOPS_LLM_BASE_URL=fake_llm.url(), RELAYOPS_LLM_MODEL=MODEL,
                            RELAYOPS_LLM_TIMEOUT_SECONDS="10")
    jobs = [queue.enqueue("acme", f"inv-{n}", 1, invoice.payload)[0] for n, invoice in enumerate(INVOICES)]
    wait_for(lambda: not Job.objects.exclude(status__in=TERMINAL_STATUSES).exists()
             and not OutboxEvent.objects.filter(published_at__isnull=True).exists(), timeout=40, what="jobs done")
    assert cluster.stop() == 0

    for job, invoice in zip(jobs, INVOICES):
        job.refresh_from_db()
        assert job.status == "succeeded" and job.result.data == invoice.fields
        assert effects(job.idempotency_key) == (1, 1, 1)
    attempts = list(Attempt.objects.filter(job=jobs[0]).order_by("fence"))
    assert [a.error_code for a in attempts] == ["llm_server_error", ""]
    assert (attempts[1].leased_at - attempts[0].ended_at).total_seconds() >= 2  # not before its Retry-After
    assert set(Attempt.objects.values_list("extractor", "model_name")) == {("llm", MODEL)}
    assert Attempt.objects.filter(input_tokens=812, output_tokens=240).count() == len(INVOICES)
