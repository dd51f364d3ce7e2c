"""The ingest API (django-ninja): ``POST /api/v1/documents``, ``GET /api/v1/jobs/{id}``,
``POST /api/v1/jobs/{id}/cancel``, ``POST /api/v1/jobs/{id}/run-now``,
``GET /api/v1/documents/{document_id}``; the OpenAPI schema at ``/api/v1/openapi.json``.

Every request carries ``Authorization: Bearer <API key>``; the key decides the tenant. Every error is
problem+json (ingest.problems). Jobs are created by ``queue.enqueue`` only (through ingest.documents).
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI, Status, Swagger
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from controls import services
from controls.actors import Actor
from controls.errors import NotApplicableError, NotFoundError, NotPermittedError
from ingest import problems, status
from ingest.documents import submit
from ingest.keys import KeyState, authenticate
from ingest.models import ApiKey
from ingest.schemas import Accepted, ActionIn, DocumentIn, DocumentOut, JobOut, ProblemOut
from pipeline.errors import IdempotencyConflictError
from pipeline.idempotency import validate_document_id
from pipeline.models import Job
from relayops.errors import InvalidInputError
from relayops.logging import get_logger

log = get_logger(__name__)

MAX_ID = 2**63 - 1
ERRORS: dict[int | str, Any] = {code: ProblemOut for code in (400, 401, 404, 409, 413, 415, 422)}
KEY_PROBLEMS = {
    KeyState.MALFORMED: "is not a RelayOps API key (rk_...)",
    KeyState.UNKNOWN: "is not a known API key",
    KeyState.REVOKED: "was revoked",
}


class _BodyError(Exception):
    def __init__(self, problem: problems.Problem) -> None:
        self.problem = problem


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class StrictJsonParser(Parser):
    """The body must be declared JSON and be UTF-8 JSON without NaN or infinities."""

    def parse_body(self, request: HttpRequest) -> Any:
        if request.content_type != "application/json":
            raise _BodyError(problems.Problem(415, "unsupported-media-type", "send Content-Type: application/json",
                                              errors=[problems.FieldError("Content-Type", "must be application/json")]))
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError:
            raise _BodyError(problems.invalid("body", "is not UTF-8", 400)) from None
        try:
            return json.loads(text, parse_constant=_constant, parse_float=_finite)
        except (ValueError, RecursionError):
            raise _BodyError(problems.invalid("body", "is not valid JSON", 400)) from None


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer <key>``: the key's tenant is the request's (``request.auth``). Unlike
    ninja's bearer, every refusal says which part is wrong (missing, malformed, unknown, revoked)."""

    def __call__(self, request: HttpRequest) -> ApiKey:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if not header:
            raise self._refused("is missing: send Authorization: Bearer <API key>")
        if scheme.lower() != "bearer" or not token.strip():
            raise self._refused("must be 'Bearer <API key>'")
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey:
        checked = authenticate(token)
        if checked.key is None or checked.state != KeyState.VALID:
            raise self._refused(KEY_PROBLEMS.get(checked.state, "is not valid"), key=checked.state != KeyState.MALFORMED)
        return checked.key

    @staticmethod
    def _refused(problem: str, key: bool = False) -> problems.Problem:
        field = "API key" if key else "Authorization"
        return problems.Problem(401, "unauthorized", f"{field} {problem}", errors=[problems.FieldError(field, problem)],
                                headers={"WWW-Authenticate": 'Bearer realm="relayops"'})


class LocalSwagger(Swagger):
    """The API docs page: ninja's Swagger UI, its JavaScript and styles from our static files and started
    by a script file (no inline script: the Content-Security-Policy holds on this page too). ninja serves
    it so only when it is an installed app, and here it is not (relayops.settings says why); otherwise it
    links a CDN. No online validator badge: nothing leaves this site."""

    def __init__(self) -> None:
        super().__init__(settings={"validatorUrl": None})

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        settings = {**self.settings, "url": self.get_openapi_url(api, kwargs)}  # the shared instance unchanged
        return render(request, self.template, {"swagger_settings": json.dumps(settings), "api": api,
                                               "add_csrf": False})  # a bearer key, never a cookie


api = NinjaAPI(
    title="RelayOps ingest API", version="1", description="Put documents into RelayOps and follow their jobs.",
    urls_namespace="ingest-api", auth=ApiKeyAuth(), parser=StrictJsonParser(), docs=LocalSwagger(), docs_url="/docs",
    openapi_url="/openapi.json",
)


def _tenant(request: HttpRequest) -> str:
    key = request.auth  # type: ignore[attr-defined]
    assert isinstance(key, ApiKey)
    return key.tenant


def _job_url(request: HttpRequest, job_id: int) -> str:
    return request.build_absolute_uri(f"/api/v1/jobs/{job_id}")


@api.post("/documents", response={200: Accepted, 201: Accepted, **ERRORS}, summary="Ingest a document")
def post_document(request: HttpRequest, document: DocumentIn) -> Status[dict[str, Any]]:
    """201 with a new job; 200 with the existing one when the same tenant, document, version and payload
    (content + metadata) were sent before; 409 when the same key arrives with another payload."""
    submitted = submit(_tenant(request), document.document_id, document.operation_version, document.content,
                       metadata=document.metadata, deadline_seconds=document.deadline_seconds)
    job = submitted.job
    return Status(201 if submitted.created else 200, {
        "job_id": job.pk, "idempotency_key": job.idempotency_key, "status": job.status,
        "status_url": _job_url(request, job.pk), "created": submitted.created,
    })


@api.get("/jobs/{job_id}", response={200: JobOut, **ERRORS}, summary="A job's status, timings and result")
def get_job(request: HttpRequest, job_id: int) -> dict[str, Any]:
    """Another tenant's job is a 404, exactly like a job that does not exist."""
    job = Job.objects.defer("payload").filter(pk=job_id, tenant=_tenant(request)).first() if 0 < job_id <= MAX_ID else None
    if job is None:
        raise problems.Problem(404, "not-found", f"no job {job_id} for this API key's tenant")
    return status.job_status(job)


def _control(request: HttpRequest, job_id: int, action: Any, body: ActionIn) -> dict[str, Any]:
    key = request.auth  # type: ignore[attr-defined]
    assert isinstance(key, ApiKey)
    if not 0 < job_id <= MAX_ID:
        raise problems.Problem(404, "not-found", f"no job {job_id} for this API key's tenant")
    try:
        job = action(job_id, Actor.api_key(key.name, key.tenant), reason=body.reason)
    except NotFoundError:
        raise problems.Problem(404, "not-found", f"no job {job_id} for this API key's tenant") from None
    except NotApplicableError as exc:
        raise problems.Problem(409, "not-applicable", str(exc)) from None
    except NotPermittedError as exc:
        raise problems.Problem(403, "forbidden", str(exc)) from None
    return status.job_status(Job.objects.defer("payload").get(pk=job.pk))


@api.post("/jobs/{job_id}/cancel", response={200: JobOut, **ERRORS, 403: ProblemOut},
          summary="Cancel a queued or leased job")
def cancel_job(request: HttpRequest, job_id: int, body: ActionIn) -> dict[str, Any]:
    """Ends the job as ``cancelled`` (terminal): a queued job is never run; a running one's result is refused.
    409 when the job is finished already; another tenant's job is a 404. Audited as ``api-key:<key name>``."""
    return _control(request, job_id, services.cancel_job, body)


@api.post("/jobs/{job_id}/run-now", response={200: JobOut, **ERRORS, 403: ProblemOut},
          summary="Run a delayed job now")
def run_job_now(request: HttpRequest, job_id: int, body: ActionIn) -> dict[str, Any]:
    """A job waiting out a retry's backoff becomes claimable now. 409 when it is not delayed (due already,
    running or finished); another tenant's job is a 404. Audited as ``api-key:<key name>``."""
    return _control(request, job_id, services.run_job_now, body)


@api.get("/documents/{path:document_id}", response={200: DocumentOut, **ERRORS}, summary="Every version of a document")
def get_document(request: HttpRequest, document_id: str) -> dict[str, Any]:
    validate_document_id(document_id)  # an id no job can have (NUL, control characters) is refused, not looked up
    jobs = list(Job.objects.filter(tenant=_tenant(request), document_id=document_id).defer("payload")
                .order_by("operation_version"))
    if not jobs:
        raise problems.Problem(404, "not-found", "no document with this id for this API key's tenant")
    return {"document_id": document_id, "versions": [
        {"job_id": j.pk, "operation_version": j.operation_version, "idempotency_key": j.idempotency_key,
         "status": j.status, "created_at": j.created_at, "finished_at": j.finished_at,
         "status_url": _job_url(request, j.pk)} for j in jobs]}


@api.exception_handler(problems.Problem)
def _problem(request: HttpRequest, exc: problems.Problem) -> HttpResponse:
    return problems.response(exc, request)


@api.exception_handler(InvalidInputError)
def _invalid(request: HttpRequest, exc: InvalidInputError) -> HttpResponse:
    return problems.response(problems.invalid(exc.field, exc.problem), request)


@api.exception_handler(IdempotencyConflictError)
def _conflict(request: HttpRequest, exc: IdempotencyConflictError) -> HttpResponse:
    existing = Job.objects.filter(idempotency_key=exc.key).values_list("pk", flat=True).first()
    return problems.response(problems.Problem(
        409, "idempotency-conflict",
        f"{exc.key} was already submitted with another payload (content or metadata); send a new operation_version "
        "to process the new payload", idempotency_key=exc.key, job_id=existing,
        status_url=_job_url(request, existing) if existing else None,
    ), request)


@api.exception_handler(ValidationError)
def _validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    found = []
    for error in exc.errors:
        place = [str(part) for part in error.get("loc", ()) if part not in ("body", "document", "path", "query")]
        found.append(problems.FieldError(".".join(place) or "body", str(error.get("msg", "is invalid"))))
    detail = "; ".join(f"{e.field}: {e.problem}" for e in found)
    return problems.response(problems.Problem(422, "invalid-input", detail, errors=found), request)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, _BodyError):
        return problems.response(exc.__cause__.problem, request)
    if isinstance(exc, AuthenticationError):
        return problems.for_status(401, request, headers={"WWW-Authenticate": 'Bearer realm="relayops"'})
    return problems.for_status(exc.status_code, request)


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.error("api.failed", method=request.method, error_type=type(exc).__name__)  # never the text: it may quote input
    if isinstance(exc, (OperationalError, InterfaceError)):  # the database is down or the connection dropped
        return problems.for_status(503, request, headers={"Retry-After": "5"})
    return problems.for_status(500, request)
