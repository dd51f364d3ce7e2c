"""Job states and the one table of transitions the queue service may make."""

from __future__ import annotations

from django.db import models


class JobStatus(models.TextChoices):
    # Waiting to be claimed once visible_at passes. Moved out by lease_next (leased, or cancelled
    # when its deadline has passed).
    QUEUED = "queued"
    # Held by one worker until lease_until. Moved out by its lease holder (commit/ack, nack, release),
    # by lease_next when the lease expired (re-leased with a new fence, or cancelled past its deadline),
    # or by the lease rescuer (dead-lettered once the last attempt's lease expired).
    LEASED = "leased"
    # Terminal: the result, its event and the completion committed together.
    SUCCEEDED = "succeeded"
    # Terminal: in the DLQ with a classified reason. Only an operator's reprocess makes a new job.
    DEAD_LETTERED = "dead_lettered"
    # Terminal: cancelled (deadline passed or unreachable, or cancelled by the work). No DLQ path.
    CANCELLED = "cancelled"


LIVE_STATUSES = (JobStatus.QUEUED, JobStatus.LEASED)
TERMINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.DEAD_LETTERED, JobStatus.CANCELLED)

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.QUEUED: frozenset({JobStatus.LEASED, JobStatus.CANCELLED}),
    JobStatus.LEASED: frozenset(
        {
            JobStatus.LEASED,  # an expired lease taken over (fence + 1)
            JobStatus.QUEUED,  # retry with backoff, or released on shutdown
            JobStatus.SUCCEEDED,
            JobStatus.DEAD_LETTERED,
            JobStatus.CANCELLED,
        }
    ),
    JobStatus.SUCCEEDED: frozenset(),
    JobStatus.DEAD_LETTERED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}


def sources_of(new: JobStatus) -> list[str]:
    """The statuses from which ``new`` may be entered: the guard of a transition's UPDATE."""
    return [str(old) for old, targets in TRANSITIONS.items() if new in targets]
