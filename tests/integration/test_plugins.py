"""Extractors and publishers chosen by setting: validated at start-up by a system check with a clear
error, and used by the drains django-q2 runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from django.core.checks import run_checks
from django.test import override_settings
from django.conf import settings

from pipeline import queue
from pipeline.extraction.llm import LLMExtractor
from pipeline.extraction.rules import invoice_extractor
from pipeline.models import OutboxEvent, Result, Review
from pipeline.plugins import FanoutPublisher, configured_extractor, configured_publisher
from pipeline.relay import ConsumerPublisher
from pipeline.runtime import tasks
from tests.acceptance.conftest import ROOT
from tests.conftest import invoice
from tests.integration import plugins


def relayops(**options) -> override_settings:
    return override_settings(RELAYOPS={**settings.RELAYOPS, **options})


def errors(check_id: str) -> list[str]:
    return [message.msg for message in run_checks() if message.id == check_id]


@pytest.mark.parametrize(("spec", "kind"), [
    ("rules", type(invoice_extractor)), ("tests.integration.plugins.custom_extractor", type(invoice_extractor)),
    ("tests.integration.plugins.CountingExtractor", plugins.CountingExtractor),
])
def test_the_extractor_setting_names_a_builtin_or_a_dotted_path(spec, kind):
    with relayops(EXTRACTOR=spec):
        assert isinstance(configured_extractor(), kind)
        assert errors("relayops.E006") == []


def test_llm_needs_its_base_url_and_model_and_says_so():
    with relayops(EXTRACTOR="llm", LLM_BASE_URL="", LLM_MODEL=""):
        [message] = errors("relayops.E006")
    assert "RELAYOPS_LLM_BASE_URL must be an http(s) URL" in message and "RELAYOPS_LLM_MODEL" in message
    with relayops(EXTRACTOR="llm", LLM_BASE_URL="http://127.0.0.1:11434/v1", LLM_MODEL="qwen2.5:0.5b"):
        assert isinstance(configured_extractor(), LLMExtractor) and errors("relayops.E006") == []


@pytest.mark.parametrize(("spec", "says"), [
    ("regex", "not a built-in, and it does not import"),
    ("tests.integration.plugins.missing", "does not import"),
    ("tests.integration.plugins.NOT_CALLABLE", "is not callable"),
    ("", "is empty"),
])
def test_a_wrong_extractor_is_a_clear_startup_error(spec, says):
    with relayops(EXTRACTOR=spec):
        [message] = errors("relayops.E006")
    assert says in message and "RELAYOPS_EXTRACTOR" in message


def test_publishers_default_to_the_review_handoff_and_webhooks_and_fan_out_when_several():
    from webhooks.publisher import WebhookPublisher

    default = configured_publisher()
    assert isinstance(default, FanoutPublisher)
    assert [type(p) for p in default.publishers] == [ConsumerPublisher, WebhookPublisher]
    with relayops(PUBLISHERS=["review-handoff"]):
        assert isinstance(configured_publisher(), ConsumerPublisher)
    with relayops(PUBLISHERS=["review-handoff", "tests.integration.plugins.RecordingPublisher"]):
        publisher = configured_publisher()
        assert isinstance(publisher, FanoutPublisher)
        assert [type(p) for p in publisher.publishers] == [ConsumerPublisher, plugins.RecordingPublisher]


@pytest.mark.parametrize(("specs", "says"), [
    (["tests.integration.plugins.NoPublish"], "has no publish(event) method"),
    (["kafka"], "not a built-in"),
    ([], "at least one publisher"),
])
def test_a_wrong_publisher_is_a_clear_startup_error(specs, says):
    with relayops(PUBLISHERS=specs):
        [message] = errors("relayops.E007")
    assert says in message and "RELAYOPS_PUBLISHERS" in message


@pytest.mark.parametrize("command", ["check", "qcluster"])  # qcluster runs its own selection of checks
def test_manage_py_refuses_to_start_with_a_wrong_extractor(command):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "relayops.settings_test", "RELAYOPS_EXTRACTOR": "regexp"}
    # Its own process group: a qcluster that started after all (its checks skipped) is stopped whole.
    run = subprocess.Popen([sys.executable, "manage.py", command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        raise AssertionError(f"manage.py {command} started instead of refusing") from None
    assert run.returncode != 0
    assert "relayops.E006" in stderr and "RELAYOPS_EXTRACTOR='regexp'" in stderr


@pytest.mark.django_db(transaction=True)
def test_the_drain_task_runs_the_configured_extractor_and_publishers():
    plugins.RecordingPublisher.seen.clear()
    job, _ = queue.enqueue("acme", "doc", 1, invoice(4))
    with relayops(EXTRACTOR="tests.integration.plugins.custom_extractor", KICKS=False,
                  PUBLISHERS=["review-handoff", "tests.integration.plugins.RecordingPublisher"]):
        report = tasks.drain(max_seconds=1.0)
    assert report["jobs"] == 1 and report["published"] == 1
    assert Result.objects.get(job=job).data["vendor"] == plugins.MARK
    event = OutboxEvent.objects.get()
    assert plugins.RecordingPublisher.seen == [str(event.event_id)] and Review.objects.get().job_id == job.pk


def test_one_failing_publisher_does_not_keep_the_event_from_the_others():
    import datetime as dt
    import uuid

    from pipeline.events import Event, PublishError

    class Down:
        def publish(self, event: Event) -> None:
            raise PublishError("http_status", 502)

    recording = plugins.RecordingPublisher()
    plugins.RecordingPublisher.seen.clear()
    event = Event(event_id=uuid.uuid4(), tenant="acme", topic="extraction.completed", idempotency_key="acme:d:v1",
                  payload={}, created_at=dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc))
    with pytest.raises(PublishError) as failed:
        FanoutPublisher([Down(), recording]).publish(event)
    assert failed.value.status == 502 and plugins.RecordingPublisher.seen == [str(event.event_id)]


def _jobs_committed(count: int, clock) -> list[str]:
    from pipeline.worker import process_once

    keys = []
    for n in range(count):
        job, _ = queue.enqueue("acme", f"doc-{n}", 1, invoice(n), clock=clock)
        assert process_once("w1", clock=clock).job_id == job.pk
        keys.append(job.idempotency_key)
    return keys


class _Recording:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def publish(self, event) -> None:
        self.seen.append(event.idempotency_key)


@pytest.mark.django_db
def test_a_batch_publisher_that_fails_as_a_whole_falls_back_to_one_event_at_a_time(clock):
    """A publish_batch that raises costs each event its own try (one bad event fails alone), not the
    drain or the whole batch."""
    from pipeline import relay

    keys = _jobs_committed(3, clock)

    class BrokenBatch(_Recording):
        def publish_batch(self, events, out_of_time):
            raise RuntimeError("batch refused")

        def publish(self, event) -> None:
            if event.idempotency_key == keys[1]:
                raise RuntimeError("this one is bad")
            super().publish(event)

    publisher = BrokenBatch()
    report = relay.publish_pending(publisher=publisher, clock=clock)
    assert (report.claimed, report.published, report.failed) == (3, 2, 1)
    assert publisher.seen == [keys[0], keys[2]]
    assert OutboxEvent.objects.get(idempotency_key=keys[1]).failures == 1


@pytest.mark.django_db
def test_a_slow_publisher_never_keeps_the_next_one_from_every_event(clock):
    """Out of time after a slow first publisher, the next one still tries the first event: each pass
    publishes at least one event to all, so none is given back untried for ever."""
    from pipeline import relay

    keys = _jobs_committed(3, clock)
    now = [0.0]

    class Slow(_Recording):
        def publish(self, event) -> None:
            super().publish(event)
            now[0] += 20.0  # longer than half the 30 s claim

    slow, after = Slow(), _Recording()
    report = relay.publish_pending(publisher=FanoutPublisher([slow, after]), claim_seconds=30, clock=clock,
                                   monotonic=lambda: now[0])
    assert (report.published, report.released) == (1, 2)
    assert slow.seen == after.seen == [keys[0]]
    assert OutboxEvent.objects.get(idempotency_key=keys[0]).published_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize("chain", ["review-handoff", "default"])
def test_a_result_no_review_can_be_made_from_fails_alone_when_the_claim_hands_off(clock, chain):
    """The relay's claim does the review consumer's work (it comes first); an event whose payload makes no
    review fails the one-statement claim, and the relay then claims alone and hands events over one by one:
    the others get their review and are published, the bad one fails by itself, and every later
    publisher still gets the events."""
    from pipeline import relay
    from pipeline.consumer import REVIEW_CONSUMER
    from pipeline.models import ConsumedEvent

    keys = _jobs_committed(3, clock)
    OutboxEvent.objects.filter(idempotency_key=keys[1]).update(payload={"job_id": "not a number"})
    after = _Recording()
    publisher = ConsumerPublisher(clock) if chain == "review-handoff" else FanoutPublisher([ConsumerPublisher(clock), after])
    report = relay.publish_pending(publisher=publisher, clock=clock)
    assert (report.claimed, report.published, report.failed) == (3, 2, 1)
    assert sorted(Review.objects.values_list("idempotency_key", flat=True)) == [keys[0], keys[2]]
    assert ConsumedEvent.objects.filter(consumer=REVIEW_CONSUMER).count() == 2
    bad = OutboxEvent.objects.get(idempotency_key=keys[1])
    assert (bad.failures, bad.published_at) == (1, None)
    assert after.seen == ([] if chain == "review-handoff" else keys)  # a later publisher: every event, in order


@pytest.mark.django_db
def test_the_claim_hands_results_off_once_and_the_next_publishers_get_every_event(clock):
    from pipeline import relay

    keys = _jobs_committed(3, clock)
    after = _Recording()
    report = relay.publish_pending(publisher=FanoutPublisher([ConsumerPublisher(clock), after]), clock=clock)
    assert (report.claimed, report.published, report.failed) == (3, 3, 0)
    assert after.seen == keys
    assert sorted(Review.objects.values_list("idempotency_key", flat=True)) == keys
    OutboxEvent.objects.update(published_at=None, claim_token=None, claimed_until=None)  # a republish
    assert relay.publish_pending(publisher=FanoutPublisher([ConsumerPublisher(clock), after]), clock=clock).published == 3
    assert Review.objects.count() == 3 and after.seen == keys + keys  # the consumer dedupes; the others see it again
