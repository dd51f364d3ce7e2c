"""System checks of the webhook settings: the timeout, and the keys that encrypt endpoint secrets."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from pipeline.checks import TAG
from webhooks import secrets

MAX_TIMEOUT_SECONDS = 60.0


def check_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise ImproperlyConfigured(
            f"RELAYOPS_WEBHOOK_TIMEOUT_SECONDS must be a number in (0, {MAX_TIMEOUT_SECONDS:g}], got {value!r}"
        )
    return float(value)


@checks.register(TAG)
def webhook_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    try:
        check_timeout(settings.RELAYOPS["WEBHOOK_TIMEOUT_SECONDS"])
    except ImproperlyConfigured as exc:
        errors.append(checks.Error(str(exc), id="relayops.E021"))
    try:
        secrets.check_keys()
    except ImproperlyConfigured as exc:
        errors.append(checks.Error(str(exc), id="relayops.E022"))
    return errors
