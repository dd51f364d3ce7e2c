import pytest

from pipeline import queue, relay
from pipeline.models import OutboxEvent, Result, Review
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


def test_one_job_end_to_end(clock):
    job, created = queue.enqueue("acme", "doc-1", 1, invoice(), clock=clock)
    assert created
    out = process_once("w1", clock=clock)
    assert out.outcome == "committed"
    assert relay.publish_pending(clock=clock).published == 1
    assert Result.objects.count() == OutboxEvent.objects.count() == Review.objects.count() == 1
    job.refresh_from_db()
    assert job.status == "succeeded"
    assert list(job.attempts.values_list("fence", flat=True)) == [1]
