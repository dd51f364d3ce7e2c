"""The lease rescuer: dead-letters jobs whose last attempt's lease expired (the worker died).

Expired leases with attempts left need no rescue: lease_next takes them over with a new fence.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from pipeline.models import Attempt, Job
from pipeline.reasons import DeadLetterReason, ErrorCode
from pipeline.states import JobStatus


@dataclass(frozen=True)
class RescueReport:
    dead_lettered: int
    cancelled: int


class LeaseRescuer:
    def __init__(self, batch_size: int = 500) -> None:
        if not 1 <= batch_size <= 10_000:
            raise ValueError("batch_size must be in [1, 10000]")
        self.batch_size = batch_size

    def run_once(self, now: dt.datetime) -> RescueReport:
        from dlq.services import dead_letter_job

        dead = cancelled = 0
        with transaction.atomic():
            exhausted = (
                Job.objects.select_for_update(skip_locked=True)
                .filter(status=JobStatus.LEASED, lease_until__lt=now, attempt__gte=F("max_attempts"))
                .only("id", "fence", "deadline_at")[: self.batch_size]
            )
            for job in exhausted:
                guard = Job.objects.filter(pk=job.pk, fence=job.fence, status=JobStatus.LEASED)
                if job.deadline_at <= now:
                    cancelled += guard.update(status=JobStatus.CANCELLED, finished_at=now, lease_until=None,
                                              last_error_code=ErrorCode.DEADLINE_EXCEEDED)
                elif guard.update(status=JobStatus.DEAD_LETTERED, finished_at=now, lease_until=None,
                                  last_error_code=ErrorCode.LEASE_EXPIRED):
                    dead_letter_job(job.pk, DeadLetterReason.MAX_ATTEMPTS_EXCEEDED, ErrorCode.LEASE_EXPIRED, now)
                    dead += 1
                Attempt.objects.filter(job_id=job.pk, fence=job.fence, ended_at__isnull=True).update(
                    ended_at=now, error_code=ErrorCode.LEASE_EXPIRED
                )
        return RescueReport(dead_lettered=dead, cancelled=cancelled)
