"""System checks run at startup (every manage.py command, qcluster included): refuse unsafe settings.

RelayOps' own checks carry the tag ``relayops`` (``manage.py check --tag relayops`` runs them alone).
``qcluster`` runs every check but the URLconf's (pipeline/management/commands/qcluster.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from pipeline.crash import CrashInjector
from pipeline.errors import InvalidInputError
from pipeline.maintenance.pruner import check_retention
from pipeline.plugins import configured_extractor, configured_publisher

TAG = "relayops"


@checks.register(TAG)
def retention_windows(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The consumer's dedupe memory must outlive the outbox's retention (pipeline.maintenance.pruner)."""
    options = settings.RELAYOPS
    try:
        check_retention(options["OUTBOX_RETENTION_DAYS"], options["CONSUMER_DEDUPE_RETENTION_DAYS"])
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="relayops.E001")]
    return []


@checks.register(TAG)
def crash_points(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    spec = settings.RELAYOPS["CRASH_POINTS"]
    if not spec:
        return []
    try:
        CrashInjector.parse(spec, kill=True)
    except InvalidInputError as exc:
        return [checks.Error(f"RELAYOPS_CRASH_POINTS: {exc}", id="relayops.E002")]
    return [checks.Warning(f"Crash injection is ON ({spec}): workers SIGKILL themselves.", id="relayops.W001")]


@checks.register(TAG)
def cluster_timing(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """django-q2 must never time out or redeliver a drain that is still within its budget."""
    options, q = settings.RELAYOPS, settings.Q_CLUSTER
    drain, grace = options["DRAIN_SECONDS"], options["SHUTDOWN_GRACE_SECONDS"]
    timeout, retry = q.get("timeout"), q.get("retry", 60)
    errors: list[checks.CheckMessage] = []
    if timeout is not None and timeout <= drain + grace:
        errors.append(checks.Error(
            f"Q_CLUSTER timeout ({timeout}) must exceed RELAYOPS DRAIN_SECONDS + SHUTDOWN_GRACE_SECONDS "
            f"({drain + grace:g}).", id="relayops.E003"))
    if timeout is not None and retry <= timeout:
        errors.append(checks.Error(f"Q_CLUSTER retry ({retry}) must exceed timeout ({timeout}).", id="relayops.E004"))
    if settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
        errors.append(checks.Error("Django's psycopg pool breaks qcluster after fork: remove OPTIONS['pool'].",
                                   id="relayops.E005"))
    return errors


@checks.register(TAG)
def plugins(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The extractor and the publishers the settings name must load (pipeline.plugins)."""
    errors: list[checks.CheckMessage] = []
    for check_id, load in (("relayops.E006", configured_extractor), ("relayops.E007", configured_publisher)):
        try:
            load()
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(str(exc), id=check_id))
    return errors


@checks.register(TAG)
def outbox_failure_policy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The backoff and parking of failed publications (pipeline.relay.FailurePolicy) must be sane."""
    from pipeline.relay import FailurePolicy

    try:
        FailurePolicy.from_settings()
    except InvalidInputError as exc:
        return [checks.Error(f"RELAYOPS_OUTBOX_{exc.field.upper()}: {exc.problem}", id="relayops.E020")]
    return []


@checks.register(TAG)
def outbox_batching(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The relay's batch size and window (pipeline.runtime.drain) must be sane."""
    from pipeline.runtime.drain import Drain

    options = settings.RELAYOPS
    try:
        Drain("check", max_seconds=1, batch_size=options["OUTBOX_BATCH_SIZE"],
              batch_window_seconds=options["OUTBOX_BATCH_WINDOW_SECONDS"])
    except InvalidInputError as exc:
        return [checks.Error(f"RELAYOPS_OUTBOX_{exc.field.upper()}: {exc.problem}", id="relayops.E031")]
    return []


@checks.register(TAG)
def listen_database(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The drains' LISTEN connection (pipeline.runtime.wakeups) must reach the default database.

    A NOTIFY reaches only the listeners of its own database, so a URL that parses but names another
    database costs every wake-up silently (drains would only poll). The URL may carry a password:
    no message repeats it.
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    url = settings.RELAYOPS["LISTEN_DATABASE_URL"]
    if not url:
        return []
    if connection.vendor != "postgresql":
        return [checks.Error("RELAYOPS_LISTEN_DATABASE_URL is set but the default database is not PostgreSQL "
                             "(only PostgreSQL has LISTEN): unset it.", id="relayops.E030")]
    if not url.startswith(("postgresql://", "postgres://")):
        return [checks.Error("RELAYOPS_LISTEN_DATABASE_URL must be a postgresql:// (or postgres://) URL: "
                             "postgresql://USER:PASSWORD@HOST:PORT/NAME.", id="relayops.E030")]
    try:
        dbname = conninfo_to_dict(url).get("dbname")
    except ProgrammingError:
        return [checks.Error("RELAYOPS_LISTEN_DATABASE_URL is not a URL libpq can parse "
                             "(postgresql://USER:PASSWORD@HOST:PORT/NAME).", id="relayops.E030")]
    if not dbname:
        return [checks.Error("RELAYOPS_LISTEN_DATABASE_URL must name the database (.../NAME), the one "
                             "DATABASE_URL uses.", id="relayops.E030")]
    default = settings.DATABASES["default"]["NAME"]
    if dbname != default:
        return [checks.Warning(
            f"RELAYOPS_LISTEN_DATABASE_URL names database {dbname!r}, DATABASE_URL {default!r}: a NOTIFY "
            "reaches only listeners on its own database, so drains would wake only on their poll. If a "
            "pooler maps one name to the other, silence relayops.W030.", id="relayops.W030")]
    return []
