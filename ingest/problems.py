"""RFC 9457 problem details: every error the API answers is ``application/problem+json``.

``Problem`` is raised anywhere in the API and rendered by ``response``; ``for_status`` turns any
other error response (a 404 from the URL resolver, a 405, a 413) into one. A problem names the
field and why, never echoes the value that was refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from django.http import HttpRequest, HttpResponse

CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "urn:relayops:problem:"


@dataclass(frozen=True)
class FieldError:
    field: str
    problem: str


class Problem(Exception):
    """An API error: its status, a short ``type`` slug, a human ``detail`` and optional extensions."""

    def __init__(
        self, status: int, slug: str, detail: str, *, errors: list[FieldError] | None = None,
        headers: dict[str, str] | None = None, **extensions: Any,
    ) -> None:
        self.status = status
        self.slug = slug
        self.detail = detail
        self.errors = errors or []
        self.headers = headers or {}
        self.extensions = extensions
        super().__init__(f"{status} {slug}: {detail}")


def invalid(field_name: str, problem: str, status: int = 422) -> Problem:
    """The request is well-formed JSON but a field is refused: 422 naming it."""
    return Problem(status, "invalid-input", f"{field_name}: {problem}", errors=[FieldError(field_name, problem)])


def title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def response(problem: Problem, request: HttpRequest | None = None) -> HttpResponse:
    body: dict[str, Any] = {
        "type": TYPE_BASE + problem.slug, "title": title(problem.status), "status": problem.status,
        "detail": problem.detail,
    }
    if request is not None:
        body["instance"] = request.path
    if problem.errors:
        body["errors"] = [{"field": e.field, "problem": e.problem} for e in problem.errors]
    body.update(problem.extensions)
    answer = HttpResponse(json.dumps(body), status=problem.status, content_type=CONTENT_TYPE)
    for name, value in problem.headers.items():
        answer[name] = value
    return answer


GENERIC = {
    400: ("bad-request", "the request could not be read"),
    401: ("unauthorized", "send Authorization: Bearer <API key>"),
    403: ("forbidden", "this request is not allowed"),
    404: ("not-found", "no such resource"),
    405: ("method-not-allowed", "this resource does not accept that method"),
    413: ("body-too-large", "the request body is too large"),
    415: ("unsupported-media-type", "send the body as application/json"),
    429: ("too-many-requests", "slow down"),
    500: ("server-error", "the server failed; nothing was written"),
    503: ("unavailable", "the database is unreachable; try again shortly"),
}


def for_status(status: int, request: HttpRequest | None = None, *, headers: dict[str, str] | None = None) -> HttpResponse:
    """The problem+json answer for a bare HTTP error status."""
    slug, detail = GENERIC.get(status, ("client-error" if status < 500 else "server-error", title(status).lower()))
    return response(Problem(status, slug, detail, headers=headers), request)
