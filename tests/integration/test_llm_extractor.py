"""The LLM extractor against a scripted fake OpenAI-compatible server: each answer ends in the right
decision (commit, retry, dead letter or cancel) with the right code and spend on the attempt row, and
nothing doubled; no prompt, document or answer in any log, code or dead letter."""

from __future__ import annotations

import datetime as dt
import json
import logging

import pytest

from pipeline import queue, relay
from pipeline.extraction import synthetic
from pipeline.extraction.llm import SYSTEM_PROMPT, prompt_hash
from pipeline.models import Attempt, DeadLetter, Job
from pipeline.worker import process_once
from tests.integration.conftest import one_of_each, snapshot
from tests.integration.fake_llm import API_KEY, MODEL, completion, fake_llm  # noqa: F401  (fixture)

INVOICE = synthetic.valid(11)


@pytest.fixture
def job(db, clock) -> Job:
    job, _ = queue.enqueue("acme", "inv-11", 1, INVOICE.payload, clock=clock)
    return job


def run(fake, clock, **config) -> str:
    return process_once("w1", extractor=fake.extractor(clock=clock, **config), clock=clock).outcome


def attempt_of(job: Job) -> Attempt:
    return Attempt.objects.get(job=job)


def test_a_good_answer_commits_once_with_the_attempts_spend(job, fake_llm, clock):
    fake_llm.answer(completion(json.dumps(INVOICE.fields)))
    assert run(fake_llm, clock) == "committed"
    relay.publish_pending(clock=clock)
    job.refresh_from_db()
    assert job.status == "succeeded" and job.result.data == INVOICE.fields
    assert one_of_each(job.idempotency_key) == (1, 1, 1)
    attempt = attempt_of(job)
    assert (attempt.extractor, attempt.model_name, attempt.prompt_hash) == ("llm", MODEL, prompt_hash("json_schema"))
    assert (attempt.input_tokens, attempt.output_tokens) == (812, 240)
    assert attempt.inference_seconds is not None and attempt.inference_seconds > 0
    sent = fake_llm.requests[0]
    assert sent["authorization"] == f"Bearer {API_KEY}"
    assert sent["json"]["model"] == MODEL and sent["json"]["temperature"] == 0
    assert sent["json"]["response_format"]["type"] == "json_schema"
    assert INVOICE.text in sent["json"]["messages"][1]["content"]


@pytest.mark.parametrize("response_format", ["json_object", "none"])
def test_servers_without_structured_output_get_the_schema_in_the_prompt(job, fake_llm, clock, response_format):
    fake_llm.answer(completion("```json\n" + json.dumps(INVOICE.fields) + "\n```"))  # a fenced answer is read too
    assert run(fake_llm, clock, response_format=response_format) == "committed"
    sent = fake_llm.requests[0]["json"]
    assert "JSON schema" in sent["messages"][0]["content"]
    assert (sent.get("response_format") or {}).get("type") == ({"json_object": "json_object"}.get(response_format))


PERMANENT = {
    "malformed JSON": (lambda: completion('{"invoice_number": "INV-1", '), "llm_answer_not_json", (812, 240)),
    "schema violation": (lambda: completion(json.dumps({"invoice_number": "INV-1"})), "llm_answer_invalid", (812, 240)),
    "refusal": (lambda: completion(None, refusal="I can't help with that."), "llm_refused", (812, 240)),
    "content filter": (lambda: completion(None, finish="content_filter"), "llm_refused", (812, 240)),
    "truncated": (lambda: completion('{"invoice_number": "INV', finish="length"), "llm_answer_truncated", (812, 240)),
    "not a completion": (lambda: {"error": "wat"}, "llm_bad_response", (None, None)),
}


@pytest.mark.parametrize("case", list(PERMANENT))
def test_bad_answers_are_dead_lettered_at_once_with_their_code_and_spend(job, fake_llm, clock, case):
    body, code, tokens = PERMANENT[case]
    fake_llm.answer(body())
    assert run(fake_llm, clock) == "dead_lettered"
    dead = DeadLetter.objects.get(job=job)
    assert (dead.reason_code, dead.error_code, dead.attempts) == ("permanent_error", code, 1)
    attempt = attempt_of(job)
    assert (attempt.error_code, attempt.extractor, attempt.input_tokens, attempt.output_tokens) == (code, "llm", *tokens)
    assert one_of_each(job.idempotency_key) == (0, 0, 0)


@pytest.mark.parametrize(("status", "code"), [(400, "llm_request_rejected"), (404, "llm_request_rejected"),
                                              (422, "llm_request_rejected"), (401, "llm_unauthorized"),
                                              (403, "llm_unauthorized")])
def test_other_4xx_are_permanent(job, fake_llm, clock, status, code):
    fake_llm.answer({"error": {"message": "bad request"}}, status=status)
    assert run(fake_llm, clock) == "dead_lettered"
    assert DeadLetter.objects.get(job=job).error_code == code


def test_an_answer_that_breaks_a_business_rule_fails_validation_by_rule(job, fake_llm, clock):
    wrong = {**INVOICE.fields, "total": "1.00"}
    fake_llm.answer(completion(json.dumps(wrong)))
    assert run(fake_llm, clock) == "dead_lettered"
    dead = DeadLetter.objects.get(job=job)
    assert (dead.error_code, dead.failed_rule) == ("validation_failed", "total")
    assert attempt_of(job).input_tokens == 812  # the model's spend is kept with the failure


def test_429_retries_no_sooner_than_retry_after(job, fake_llm, clock):
    fake_llm.answer({"error": "slow down"}, status=429, headers={"Retry-After": "30"})
    assert run(fake_llm, clock) == "retry"
    job.refresh_from_db()
    assert (job.status, job.last_error_code) == ("queued", "llm_rate_limited")
    assert job.visible_at == clock.now() + dt.timedelta(seconds=30)  # the backoff alone would be about 1 s


def test_429_with_an_http_date_retry_after(job, fake_llm, clock):
    when = (clock.now() + dt.timedelta(seconds=90)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    fake_llm.answer({}, status=429, headers={"Retry-After": when})
    assert run(fake_llm, clock) == "retry"
    job.refresh_from_db()
    assert job.visible_at == clock.now() + dt.timedelta(seconds=90)


def test_a_retry_after_past_the_deadline_cancels_instead(db, fake_llm, clock):
    job, _ = queue.enqueue("acme", "soon", 1, INVOICE.payload, deadline=dt.timedelta(seconds=20), clock=clock)
    fake_llm.answer({}, status=429, headers={"Retry-After": "60"})
    assert run(fake_llm, clock) == "cancelled"
    job.refresh_from_db()
    assert (job.status, job.last_error_code) == ("cancelled", "deadline_unreachable")


def test_500_is_retried_then_dead_lettered_when_attempts_run_out(job, fake_llm, clock):
    fake_llm.answer({"error": "boom"}, status=500)
    outcomes = []
    for _ in range(3):
        outcomes.append(run(fake_llm, clock))
        clock.advance(600)
    assert outcomes == ["retry", "retry", "dead_lettered"]
    dead = DeadLetter.objects.get(job=job)
    assert (dead.reason_code, dead.error_code, dead.attempts) == ("max_attempts_exceeded", "llm_server_error", 3)
    assert list(Attempt.objects.filter(job=job).values_list("error_code", flat=True)) == ["llm_server_error"] * 3
    assert len(fake_llm.requests) == 3


def test_a_hang_past_the_timeout_is_a_transient_timeout(job, fake_llm, clock):
    fake_llm.hang()
    assert run(fake_llm, clock, timeout_seconds=0.5) == "retry"
    job.refresh_from_db()
    assert job.last_error_code == "llm_timeout"
    assert attempt_of(job).inference_seconds >= 0.5


def test_a_slow_answer_past_the_deadline_cancels_the_job(db, fake_llm, clock):
    job, _ = queue.enqueue("acme", "slow", 1, INVOICE.payload, deadline=dt.timedelta(seconds=1), clock=clock)
    fake_llm.answer(completion(json.dumps(INVOICE.fields)), delay=4.0)  # a good answer, but too late
    assert run(fake_llm, clock, timeout_seconds=60) == "cancelled"  # the request waited the time left, not 60 s
    job.refresh_from_db()
    assert (job.status, job.last_error_code) == ("cancelled", "deadline_exceeded")
    assert one_of_each(job.idempotency_key) == (0, 0, 0)


def test_an_unreachable_server_is_transient(job, clock):
    from pipeline.extraction.llm import LLMConfig, LLMExtractor

    dead_port = LLMExtractor(LLMConfig(base_url="http://127.0.0.1:9/v1", model=MODEL, timeout_seconds=2), clock=clock)
    assert process_once("w1", extractor=dead_port, clock=clock).outcome == "retry"
    job.refresh_from_db()
    assert job.last_error_code == "llm_unavailable"


def test_no_prompt_document_or_answer_reaches_a_log_a_code_or_a_dead_letter(job, fake_llm, clock, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    fake_llm.answer(completion(json.dumps({**INVOICE.fields, "total": "1.00"})))
    assert run(fake_llm, clock) == "dead_lettered"
    rows = snapshot()
    rows.pop("Job")  # the job's payload is the document itself
    stored = json.dumps(rows, default=str)
    logged = caplog.text + "".join(capsys.readouterr())
    for secret in (INVOICE.fields["vendor"], INVOICE.fields["invoice_number"], INVOICE.fields["vendor_tax_id"],
                   SYSTEM_PROMPT[:40], INVOICE.fields["line_items"][0]["description"]):
        assert secret not in stored and secret not in logged, secret


@pytest.mark.django_db(transaction=True)
def test_the_lease_is_heartbeated_during_a_long_call(fake_llm):
    job, _ = queue.enqueue("acme", "long", 1, INVOICE.payload)
    fake_llm.answer(completion(json.dumps(INVOICE.fields)), delay=2.5)  # longer than the 1 s lease
    outcome = process_once("w1", extractor=fake_llm.extractor(), lease_seconds=1.0, heartbeat=True)
    assert outcome.outcome == "committed"
    job.refresh_from_db()
    assert job.status == "succeeded" and job.attempt == 1 and job.fence == 1  # never lost, never re-leased
