"""Problem details for the whole API: a body over ``RELAYOPS_INGEST_MAX_BYTES`` is refused (413) before
it is read, and any error answer under ``/api/`` that is not problem+json already (the URL resolver's
404, a 405, Django's 400 for a bad Host) becomes one. A database fault is a 503, never charged to input."""

from __future__ import annotations

from typing import Callable

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from ingest import problems
from relayops.logging import get_logger

log = get_logger(__name__)

API_PREFIX = "/api/"
KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")


class ProblemDetailsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        refused = self._refuse_body(request)
        if refused is not None:
            return refused
        response = self.get_response(request)
        if response.status_code >= 400 and not response.get("Content-Type", "").startswith(problems.CONTENT_TYPE):
            kept = {name: response[name] for name in KEPT_HEADERS if response.has_header(name)}
            return problems.for_status(response.status_code, request, headers=kept)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX) and isinstance(exception, (OperationalError, InterfaceError)):
            log.error("api.database_error", error_type=type(exception).__name__)
            return problems.for_status(503, request, headers={"Retry-After": "5"})
        return None

    def _refuse_body(self, request: HttpRequest) -> HttpResponse | None:
        declared = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(declared)
        except ValueError:
            length = -1
        if length < 0:
            return problems.response(problems.invalid("Content-Length", "must be a non-negative integer", 400), request)
        limit = settings.RELAYOPS["INGEST_MAX_BYTES"]
        if length > limit:
            return problems.response(problems.Problem(
                413, "body-too-large", f"the body is {length} bytes; at most {limit} are accepted",
                errors=[problems.FieldError("body", f"must be at most {limit} bytes")], max_bytes=limit,
            ), request)
        return None
