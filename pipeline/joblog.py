"""The fields of a job's state-change log line: who (tenant, job id, idempotency key, fence, attempt),
what came of it (outcome) and the three timings kept apart (queue wait, inference, commit).

Never content, never raw error text: only ids, codes and numbers (tests scan the logs for both).
"""

from __future__ import annotations

from typing import Any, Protocol


class _LeaseLike(Protocol):
    @property
    def job_id(self) -> int: ...
    @property
    def tenant(self) -> str: ...
    @property
    def idempotency_key(self) -> str: ...
    @property
    def fence(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def queue_wait_seconds(self) -> float | None: ...


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 6)


def job_fields(
    lease: _LeaseLike, outcome: str, *, inference_seconds: float | None = None,
    commit_seconds: float | None = None, **extra: Any,
) -> dict[str, Any]:
    """The log line's fields for ``lease``; ``extra`` adds codes or counts (never text from a document)."""
    return {
        "tenant": lease.tenant, "job_id": lease.job_id, "idempotency_key": lease.idempotency_key,
        "fence": lease.fence, "attempt": lease.attempt, "outcome": str(outcome),
        "queue_wait_seconds": _rounded(lease.queue_wait_seconds), "inference_seconds": _rounded(inference_seconds),
        "commit_seconds": _rounded(commit_seconds), **{key: str(value) if isinstance(value, str) else value
                                                        for key, value in extra.items()},
    }
