"""The machine-facing endpoints: ``/metrics`` for Prometheus, ``/healthz`` and ``/readyz`` for load
balancers and Kubernetes.

``/metrics`` answers only a scraper that presents ``RELAYOPS_METRICS_TOKEN`` (``Authorization: Bearer
...``) or comes from an address in ``RELAYOPS_METRICS_ALLOW`` (addresses or networks; the client's
address as ``relayops.security.client_ip`` reads it). With neither set it answers 403 to everyone.

The health endpoints need no sign-in and say only ``ok`` or ``unavailable``: no node name, no error
text, no count. ``/healthz``: this web process answers and reaches the database. ``/readyz``: the
cluster, as ``relayops_health --any-node`` judges it (some node's drains are alive and keeping up).
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console import metrics
from pipeline.clock import system_clock
from pipeline.runtime import liveness
from relayops.logging import get_logger
from relayops.security import client_ip

log = get_logger(__name__)


def _allowed(request: HttpRequest) -> bool:
    token = settings.RELAYOPS_METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), token.encode()):
        return True
    address = client_ip(request)
    if not address or not settings.RELAYOPS_METRICS_ALLOW:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in settings.RELAYOPS_METRICS_ALLOW)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponse("Forbidden.\n", status=403, content_type="text/plain")
    body, content_type = metrics.exposition(accept=request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)


def _answer(ok: bool) -> JsonResponse:
    return JsonResponse({"status": "ok" if ok else "unavailable"}, status=200 if ok else 503)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        log.warning("health.database_unreachable", error_type=type(exc).__name__)
        return _answer(False)
    return _answer(True)


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    try:
        health = liveness.assess(system_clock.now(), node=None, stale_seconds=settings.RELAYOPS["HEALTH_STALE_SECONDS"])
    except DatabaseError as exc:
        log.warning("health.database_unreachable", error_type=type(exc).__name__)
        return _answer(False)
    return _answer(health.healthy)
