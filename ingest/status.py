"""What the API tells a client about its jobs: status, attempts, the failure's codes, timings, the
extracted fields once it succeeded, and the review's decision (with a correction's final values). Read
only; a fixed number of queries.

Timings are three separate numbers, each None while unknown:
* ``queue_wait_seconds``: time the job waited to be leased, summed over its attempts (from enqueue,
  or from the end of the previous attempt, to each lease; retry backoff included);
* ``inference_seconds``: time the extractor ran, summed over the attempts that recorded it;
* ``review_wait_seconds``: from the review handoff to the reviewer's decision.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pipeline.models import Attempt, DeadLetter, Job, Result, Review, ReviewStatus
from pipeline.states import JobStatus
from review.models import ReviewDecision


@dataclass(frozen=True)
class Timings:
    queue_wait_seconds: float | None
    inference_seconds: float | None
    review_wait_seconds: float | None


def _seconds(delta: dt.timedelta) -> float:
    return round(max(delta.total_seconds(), 0.0), 6)


def timings(job: Job, attempts: list[Attempt], review: Review | None) -> Timings:
    waited: float | None = None
    since = job.created_at
    for attempt in attempts:  # in lease order
        waited = (waited or 0.0) + _seconds(attempt.leased_at - since)
        since = attempt.ended_at or attempt.leased_at
    recorded = [a.inference_seconds for a in attempts if a.inference_seconds is not None]
    decided_at = review.decided_at if review is not None and review.status != ReviewStatus.PENDING else None
    return Timings(
        queue_wait_seconds=round(waited, 6) if waited is not None else None,
        inference_seconds=round(sum(recorded), 6) if recorded else None,
        review_wait_seconds=_seconds(decided_at - review.created_at) if decided_at and review else None,
    )


def _attempt(attempt: Attempt) -> dict[str, Any]:
    return {
        "attempt": attempt.attempt, "fence": attempt.fence, "leased_at": attempt.leased_at,
        "ended_at": attempt.ended_at, "error_code": attempt.error_code or None,
        "failed_rule": attempt.failed_rule or None, "extractor": attempt.extractor or None,
        "model": attempt.model_name or None, "input_tokens": attempt.input_tokens,
        "output_tokens": attempt.output_tokens, "inference_seconds": attempt.inference_seconds,
        "cost": str(attempt.cost) if attempt.cost is not None else None,
    }


def _review(review: Review) -> dict[str, Any]:
    """The review's state and, once decided on the review page, its decision (a correction's final values)."""
    decision: ReviewDecision | None = getattr(review, "decision", None)
    return {
        "status": review.status, "decided_at": review.decided_at,
        "decision": decision.decision if decision is not None else None,
        "corrected_fields": decision.corrected if decision is not None else None,
    }


def job_status(job: Job) -> dict[str, Any]:
    """The job as the API shows it (five queries)."""
    attempts = list(Attempt.objects.filter(job_id=job.pk).order_by("fence"))
    review = Review.objects.filter(job_id=job.pk).select_related("decision").first()
    dead = DeadLetter.objects.filter(job_id=job.pk).first()
    result = (Result.objects.filter(job_id=job.pk).values_list("data", flat=True).first()
              if job.status == JobStatus.SUCCEEDED else None)
    failed_rule = (dead.failed_rule if dead else "") or next((a.failed_rule for a in reversed(attempts) if a.failed_rule), "")
    return {
        "id": job.pk, "idempotency_key": job.idempotency_key, "document_id": job.document_id,
        "operation_version": job.operation_version, "status": job.status, "attempts": job.attempt,
        "max_attempts": job.max_attempts, "created_at": job.created_at, "finished_at": job.finished_at,
        "deadline_at": job.deadline_at, "reason": dead.reason_code if dead else None,
        "error_code": job.last_error_code or None, "failed_rule": failed_rule or None,
        "timings": timings(job, attempts, review).__dict__, "fields": result,
        "review": _review(review) if review else None,
        "attempt_log": [_attempt(a) for a in attempts],
    }
