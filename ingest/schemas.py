"""The API's request and response bodies (pydantic, through django-ninja: they are the OpenAPI schema)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from ninja import Schema
from pydantic import ConfigDict, Field, StrictInt, StrictStr

from ingest.documents import MAX_DEADLINE_SECONDS
from pipeline.idempotency import MAX_DOCUMENT_ID_LENGTH, MAX_OPERATION_VERSION


class DocumentIn(Schema):
    """A document to ingest. The tenant is the API key's; it is never read from the body."""

    model_config = ConfigDict(extra="forbid")

    document_id: Annotated[StrictStr, Field(min_length=1, max_length=MAX_DOCUMENT_ID_LENGTH,
                                            description="Your id for the document, unique within your tenant")]
    operation_version: Annotated[StrictInt, Field(ge=1, le=MAX_OPERATION_VERSION,
                                                  description="Bump it to process the same document again")] = 1
    content: Annotated[StrictStr, Field(min_length=1, description="The document's text (UTF-8)")]
    metadata: dict[str, Any] | None = Field(default=None, description="Any JSON object; part of the payload hash")
    deadline_seconds: Annotated[float, Field(strict=True, gt=0, le=MAX_DEADLINE_SECONDS)] | None = Field(
        default=None, description="Give up (cancel) if not done this many seconds after enqueue; default 1 h")


class Accepted(Schema):
    job_id: int
    idempotency_key: str
    status: str
    status_url: str
    created: bool = Field(description="true: a new job (201); false: the existing one (200)")


class TimingsOut(Schema):
    queue_wait_seconds: float | None
    inference_seconds: float | None
    review_wait_seconds: float | None


class ReviewOut(Schema):
    status: str
    decided_at: dt.datetime | None
    decision: str | None = Field(default=None, description="approve, reject or correct, once decided")
    corrected_fields: dict[str, Any] | None = Field(
        default=None, description="A correction's final field values (``fields`` stays the extractor's output)")


class AttemptOut(Schema):
    attempt: int
    fence: int
    leased_at: dt.datetime
    ended_at: dt.datetime | None
    error_code: str | None
    failed_rule: str | None
    extractor: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    inference_seconds: float | None
    cost: str | None


class JobOut(Schema):
    id: int
    idempotency_key: str
    document_id: str
    operation_version: int
    status: str
    attempts: int
    max_attempts: int
    created_at: dt.datetime
    finished_at: dt.datetime | None
    deadline_at: dt.datetime
    reason: str | None = Field(description="The dead letter's reason code, once dead-lettered")
    error_code: str | None = Field(description="The last attempt's error code (or why it was cancelled)")
    failed_rule: str | None = Field(description="The validation rule that failed, if one did")
    timings: TimingsOut
    fields: dict[str, Any] | None = Field(description="The extracted, validated invoice once succeeded")
    review: ReviewOut | None
    attempt_log: list[AttemptOut]


class VersionOut(Schema):
    job_id: int
    operation_version: int
    idempotency_key: str
    status: str
    created_at: dt.datetime
    finished_at: dt.datetime | None
    status_url: str


class DocumentOut(Schema):
    document_id: str
    versions: list[VersionOut]


class ProblemOut(Schema):
    """RFC 9457 problem details (``application/problem+json``)."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[dict[str, str]] | None = None


class ActionIn(Schema):
    """Why a job is cancelled or run now: kept in the audit, with the API key's name as the operator."""

    model_config = ConfigDict(extra="forbid")

    reason: Annotated[StrictStr, Field(min_length=1, max_length=500, description="Why; kept in the audit")]
