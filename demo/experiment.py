"""The synthetic-metrics experiment on the real pipeline: synthetic invoices in through the HTTP API, leased,
extracted, validated and committed by real drains (threads of this process, each a ``Drain`` as a
qcluster worker runs it), handed off to review by the real relay and consumer, and decided by a
synthetic reviewer after a set delay. The depth sampler records the queue while it runs.

What it reports per document comes from the stored timestamps: queue wait (attempt due -> leased) and
inference time (the extractor's own) are measured; the review wait is synthetic (this experiment's
reviewer decides after ``review_delay``), though read from the same columns a human's decision fills.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from demo import frontdoor
from ingest.keys import create_api_key, revoke_api_key
from pipeline import reviews
from pipeline.clock import system_clock
from pipeline.extraction import synthetic
from pipeline.maintenance.sampler import DepthSampler
from pipeline.models import Attempt, Job, QueueDepthSample, Review, ReviewStatus
from pipeline.plugins import configured_extractor, configured_publisher
from pipeline.runtime import liveness
from pipeline.runtime.drain import Drain
from pipeline.runtime.shutdown import StopState
from pipeline.states import TERMINAL_STATUSES

REVIEWER = "synthetic-reviewer"


@dataclass(frozen=True)
class Plan:
    tenant: str = "synthetic"
    documents: int = 12
    interval: float = 0.25  # seconds between two arrivals
    review_delay: float = 2.0  # the synthetic reviewer decides this long after the handoff
    drains: int = 2
    sample_every: float = 0.5
    timeout: float = 120.0


@dataclass(frozen=True)
class DocumentRow:
    document_id: str
    status: str
    queue_wait: float | None  # measured: due -> leased, summed over the job's attempts
    inference: float | None  # measured: the extractor's own time, summed over attempts
    commit: float | None  # measured
    review_wait: float | None  # synthetic: decided by the experiment's reviewer
    end_to_end: float | None  # ingest -> decision


@dataclass(frozen=True)
class DepthPoint:
    at: dt.datetime
    queued: int
    leased: int
    due: int


@dataclass
class Outcome:
    started: dt.datetime
    rows: list[DocumentRow] = field(default_factory=list)
    depth: list[DepthPoint] = field(default_factory=list)
    extractor: str = ""


class _Threads:
    """Drains and the depth sampler, as threads, until ``stop()``."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.halt = threading.Event()
        self.stops = [StopState() for _ in range(plan.drains)]
        self.threads = [threading.Thread(target=self._drain, args=(i,), daemon=True) for i in range(plan.drains)]
        self.threads.append(threading.Thread(target=self._sample, daemon=True))
        self.errors: list[str] = []
        self.depth: list[DepthPoint] = []  # the sampler's rows for this tenant, a zero where it wrote none

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.halt.set()
        for stop in self.stops:
            stop.requested.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _guarded(self, body: Callable[[], None]) -> None:
        try:
            body()
        except Exception as exc:  # reported by the command; never the text (it may quote a document)
            self.errors.append(type(exc).__name__)
        finally:
            connection.close()

    def _drain(self, index: int) -> None:
        worker = f"{liveness.node_name()}:synthetic-{index}"
        options = settings.RELAYOPS

        def run() -> None:
            while not self.halt.is_set():
                Drain(worker, max_seconds=2.0, poll_seconds=min(options["DRAIN_POLL_SECONDS"], 0.25),
                      claim_seconds=options["OUTBOX_CLAIM_SECONDS"], extractor=configured_extractor(),
                      publisher=configured_publisher(), stop=self.stops[index]).run()

        self._guarded(run)

    def _sample(self) -> None:
        sampler = DepthSampler(dt.timedelta(days=settings.RELAYOPS["DEPTH_SAMPLE_RETENTION_DAYS"]))

        def run() -> None:
            while not self.halt.is_set():
                now = system_clock.now()
                sampler.run_once(now)
                # the sampler writes no row for a tenant with nothing live or pending: that is depth 0
                sample = QueueDepthSample.objects.filter(tenant=self.plan.tenant, sampled_at=now).first()
                self.depth.append(DepthPoint(now, sample.queued, sample.leased, sample.due) if sample
                                  else DepthPoint(now, 0, 0, 0))
                self.halt.wait(self.plan.sample_every)

        self._guarded(run)


def _reviewer():
    user, _ = get_user_model().objects.get_or_create(username=REVIEWER, defaults={"is_active": True})
    if user.has_usable_password():
        user.set_unusable_password()  # never signs in: it only decides this experiment's reviews
        user.save(update_fields=["password"])
    return user


def run(plan: Plan, progress: Callable[[str], None] = lambda line: None) -> Outcome:
    """Run the experiment; returns its table and the depth samples of the tenant over the run."""
    started = system_clock.now()
    stamp = started.strftime("%Y%m%d%H%M%S")
    outcome = Outcome(started)
    reviewer = _reviewer()
    key = create_api_key(plan.tenant, "synthetic-metrics", created_by="synthetic_metrics")
    threads = _Threads(plan)
    threads.start()
    try:
        job_ids = _ingest(plan, key.raw, stamp, progress)
        _review_until_done(plan, job_ids, reviewer, progress)
    finally:
        threads.stop()
        revoke_api_key(key.key.pk, by="synthetic_metrics")
    if threads.errors:
        raise RuntimeError(f"a drain or the sampler failed: {', '.join(sorted(set(threads.errors)))}")
    outcome.rows = [_row(job) for job in Job.objects.filter(pk__in=job_ids).order_by("pk")]
    outcome.depth = threads.depth
    outcome.extractor = settings.RELAYOPS["EXTRACTOR"]
    return outcome


def _ingest(plan: Plan, raw_key: str, stamp: str, progress: Callable[[str], None]) -> list[int]:
    job_ids = []
    with frontdoor.local_server() as url, httpx.Client(base_url=url, timeout=30) as client:
        for n in range(1, plan.documents + 1):
            document_id = f"SYN-{stamp}-{n:02d}"
            response = client.post("/api/v1/documents", headers={"Authorization": f"Bearer {raw_key}"}, json={
                "document_id": document_id, "content": synthetic.valid(f"synthetic-{stamp}-{n}").text})
            if response.status_code not in (200, 201):
                raise RuntimeError(f"POST {document_id}: HTTP {response.status_code}")
            job_ids.append(response.json()["job_id"])
            progress(f"  ingested {document_id} (job {job_ids[-1]})")
            time.sleep(plan.interval)
    return job_ids


def _review_until_done(plan: Plan, job_ids: list[int], reviewer: object, progress: Callable[[str], None]) -> None:
    """Decide each pending review of these jobs ``review_delay`` after its handoff; until every job is
    finished and, for those that succeeded, its review decided."""
    deadline = time.monotonic() + plan.timeout
    delay = dt.timedelta(seconds=plan.review_delay)
    while time.monotonic() < deadline:
        now = system_clock.now()
        for review in Review.objects.filter(job_id__in=job_ids, status=ReviewStatus.PENDING,
                                            created_at__lte=now - delay).order_by("pk"):
            if reviews.decide_review(review.pk, ReviewStatus.APPROVED, reviewer):
                progress(f"  approved the review of {review.document_id}")
        jobs = Job.objects.filter(pk__in=job_ids)
        finished = jobs.filter(status__in=TERMINAL_STATUSES).count() == len(job_ids)
        undecided = Review.objects.filter(job_id__in=job_ids, status=ReviewStatus.PENDING).exists()
        unreviewed = jobs.filter(status="succeeded").exclude(reviews__isnull=False).exists()
        if finished and not undecided and not unreviewed:
            return
        time.sleep(0.1)
    raise TimeoutError(f"the documents were not all extracted and reviewed within {plan.timeout:.0f} s")


def _total(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _row(job: Job) -> DocumentRow:
    attempts = list(Attempt.objects.filter(job=job).order_by("fence"))
    review = Review.objects.filter(job=job).first()
    decided = review.decided_at if review is not None else None
    return DocumentRow(
        document_id=job.document_id, status=job.status,
        queue_wait=_total([a.queue_wait_seconds for a in attempts]),
        inference=_total([a.inference_seconds for a in attempts]),
        commit=_total([a.commit_seconds for a in attempts]),
        review_wait=review.review_wait_seconds if review is not None else None,
        end_to_end=(decided - job.created_at).total_seconds() if decided is not None else None,
    )
