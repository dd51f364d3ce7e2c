"""The DLQ's exceptions, rooted in pipeline.errors. Each class's docstring is its default message."""

from __future__ import annotations

from pipeline.errors import NotReprocessableError
from pipeline.models import Job


class NextVersionExistsError(NotReprocessableError):
    """The version a reprocess would create exists already, and was not made by reprocessing this dead letter.

    ``job`` is that version; ``same_payload`` says whether it holds the same document (it then runs, or
    ran, what the reprocess would have run) or another one (the reprocess would conflict with it).
    """

    def __init__(self, job: Job, *, same_payload: bool) -> None:
        self.job = job
        self.same_payload = same_payload
        document = "the same document" if same_payload else "a different document"
        super().__init__(f"{job.idempotency_key} already exists with {document} ({status_words(job)})")


def status_words(job: Job) -> str:
    """A job's status as a sentence says it: ``queued``, ``dead-lettered``."""
    return str(job.status).replace("_", "-")
