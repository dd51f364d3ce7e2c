"""RelayOps settings, read from the environment (django-environ) and, for a local run, from ``.env``.

With no ``DATABASE_URL`` RelayOps runs on an embedded SQLite file (WAL, immediate transactions) so a
newcomer needs no server; production and the test suite run on PostgreSQL. ``./run`` writes a
git-ignored ``.env`` with a generated ``SECRET_KEY`` on first use; variables set in the environment
win over it. Production sets its variables in the environment, has no ``.env``, and does not start
without a strong ``SECRET_KEY`` (relayops.security). Deployment behind TLS: docs/operations.md.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import socket
from decimal import Decimal, InvalidOperation
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from relayops import security

BASE_DIR = Path(__file__).resolve().parent.parent
ENV_FILE = Path(os.environ.get("RELAYOPS_ENV_FILE") or BASE_DIR / ".env")
env = environ.Env()
if ENV_FILE.is_file():
    environ.Env.read_env(ENV_FILE)  # never overrides a variable already set


def _optional(name: str, kind: type[int] | type[Decimal], default: str = "") -> int | Decimal | None:
    """An optional non-negative number from the environment: empty (or ``none``) means None."""
    raw = env.str(name, default=default).strip()
    if raw.lower() in ("", "none"):
        return None
    try:
        value = kind(raw)
    except (ValueError, InvalidOperation):
        raise ImproperlyConfigured(f"{name} must be a {kind.__name__.lower()} (or empty for none), got {raw!r}")
    if value < 0 or (isinstance(value, Decimal) and not value.is_finite()):
        raise ImproperlyConfigured(f"{name} must not be negative, got {raw!r}")
    return value


DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = security.secret_key(env.str("SECRET_KEY", default=""), debug=DEBUG)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# --- /metrics (console.endpoints) ----------------------------------------------------------------
# Prometheus scrapes /metrics with this bearer token, or from these addresses or networks (comma
# separated, e.g. 10.0.0.0/8,127.0.0.1). With neither set /metrics answers 403 to everyone.
RELAYOPS_METRICS_TOKEN = env.str("RELAYOPS_METRICS_TOKEN", default="")
RELAYOPS_METRICS_ALLOW = security.networks("RELAYOPS_METRICS_ALLOW", env.list("RELAYOPS_METRICS_ALLOW", default=[]))

# --- Behind TLS (docs/operations.md, "Deploying behind TLS") --------------------------------------
# HTTPS=1: the admin is served over HTTPS by a proxy that terminates TLS and says so in
# X-Forwarded-Proto. Each setting below can still be set on its own.
HTTPS = env.bool("HTTPS", default=False)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=HTTPS)
# Load balancers and Kubernetes probe the health endpoints over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=HTTPS)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=HTTPS)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=HTTPS)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
_PROXY_SSL_HEADER = env.str("SECURE_PROXY_SSL_HEADER", default="HTTP_X_FORWARDED_PROTO" if HTTPS else "")
SECURE_PROXY_SSL_HEADER = (_PROXY_SSL_HEADER, "https") if _PROXY_SSL_HEADER else None
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=8 * 3600)  # an operator signs in once a working day
# The number of proxies in front that append to X-Forwarded-For (the login lockout counts per address).
RELAYOPS_TRUSTED_PROXIES = env.int("RELAYOPS_TRUSTED_PROXIES", default=0)

# The admin, the dashboard and the review pages load scripts, styles, images and fonts from this
# site only, and nothing inline (django-csp; the browser tests fail on any violation).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [NONE],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
    },
}

# Our apps in their layers: each may import those listed before it, never one after it (the
# third-party apps between them are not layers: pipeline comes before django_q only so that its
# qcluster command is the one manage.py runs).
INSTALLED_APPS = [
    "console.apps.ConsoleAdminConfig",  # django.contrib.admin, serving console.site.RelayOpsAdminSite
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "tenancy",
    "pipeline",  # before django_q: its qcluster command (the start-up checks without the URLconf's) wins
    "django_q",
    "axes",
    "csp",
    "dlq",
    "review",
    "controls",
    "ingest",
    "webhooks",
    "console",
    "demo",
]

MIDDLEWARE = [
    "ingest.middleware.ProblemDetailsMiddleware",  # first: every /api/ answer is problem+json, whoever made it
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it turns a lockout into the lockout page
]

ROOT_URLCONF = "relayops.urls"
# django-ninja's API docs page (ingest.api) and its JavaScript come from our templates and static files,
# never a CDN. ninja is not an installed app: every process imports every app, the cluster's workers
# included, and they never serve the API.
NINJA_PACKAGE = Path(importlib.util.find_spec("ninja").origin).parent  # type: ignore[union-attr,arg-type]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_PACKAGE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
WSGI_APPLICATION = "relayops.wsgi.application"

# --- Database -----------------------------------------------------------------------------------
SQLITE_PATH = Path(env.str("RELAYOPS_SQLITE_PATH", default=str(BASE_DIR / "var" / "relayops.sqlite3")))
if "DATABASE_URL" in env:
    DATABASES = {"default": env.db_url("DATABASE_URL")}
else:
    SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": SQLITE_PATH,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Never enable Django's psycopg pool here: qcluster forks, and pooled sockets break across fork.

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The covering indexes of the dashboard's windows (INCLUDE columns) are PostgreSQL's; on the embedded
# SQLite they are plain indexes, which is all it needs.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Sign-in throttling (django-axes) ------------------------------------------------------------
# After LOGIN_FAILURE_LIMIT failed sign-ins for one username, or from one address, that username (or
# address) is refused for LOGIN_LOCKOUT_MINUTES; a superuser can unlock sooner in the admin (Axes ›
# Access attempts: delete the row). Every failure is logged with the username and address, never
# the password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("RELAYOPS_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env.float("RELAYOPS_LOGIN_LOCKOUT_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one locks: per user and per address
AXES_LOCKOUT_CALLABLE = "console.signin.locked_out"
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "relayops.security.client_ip"
AXES_SENSITIVE_PARAMETERS: list[str] = []  # log the username and address; the password is always masked

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["relayops.formats"]  # times to the second on every page (relayops/formats/en)
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [NINJA_PACKAGE / "static"]  # ninja/redoc.standalone.js for the API docs page
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "var" / "static")))  # collectstatic fills it
# WhiteNoise serves STATIC_ROOT (compressed copies made by collectstatic); no separate static server.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- RelayOps -----------------------------------------------------------------------------------
RELAYOPS = {
    # Lease length; workers heartbeat at a third of it.
    "LEASE_SECONDS": env.float("RELAYOPS_LEASE_SECONDS", default=30.0),
    # Published outbox rows are deleted after this window, in batches (docs/operations.md).
    "OUTBOX_RETENTION_DAYS": env.float("RELAYOPS_OUTBOX_RETENTION_DAYS", default=7.0),
    # The consumer remembers event ids this long; must be >= the outbox retention window (checked).
    "CONSUMER_DEDUPE_RETENTION_DAYS": env.float("RELAYOPS_CONSUMER_DEDUPE_RETENTION_DAYS", default=30.0),
    "PRUNE_BATCH_SIZE": env.int("RELAYOPS_PRUNE_BATCH_SIZE", default=1000),
    "PRUNE_MAX_BATCHES": env.int("RELAYOPS_PRUNE_MAX_BATCHES", default=20),
    # Queue-depth samples (one row per tenant per minute) are kept this long.
    "DEPTH_SAMPLE_RETENTION_DAYS": env.float("RELAYOPS_DEPTH_SAMPLE_RETENTION_DAYS", default=7.0),
    # The other sampled measures (throughput, outbox lag, dead letters by reason, reprocess refusals,
    # drains alive per node; a few rows per tenant and node each minute) are kept this long.
    "METRIC_SAMPLE_RETENTION_DAYS": env.float("RELAYOPS_METRIC_SAMPLE_RETENTION_DAYS", default=7.0),
    # The dashboard's 24 h and 7 d charts and percentiles are kept this long per web process (0: never);
    # the last hour, and every current number, are always read afresh.
    "DASHBOARD_CACHE_SECONDS": env.float("RELAYOPS_DASHBOARD_CACHE_SECONDS", default=30.0),
    # Reprocess rate limit per tenant.
    "REPROCESS_LIMIT": env.int("RELAYOPS_REPROCESS_LIMIT", default=20),
    "REPROCESS_WINDOW_SECONDS": env.int("RELAYOPS_REPROCESS_WINDOW_SECONDS", default=3600),
    # Crash injection for real-process tests: "point:probability,..."; off by default.
    "CRASH_POINTS": env.str("RELAYOPS_CRASH_POINTS", default=""),
    "CRASH_POINTS_FORCE": env.bool("RELAYOPS_CRASH_POINTS_FORCE", default=False),
    # This machine's name in lease owners ("node:pid"), drain beats and relayops_health.
    "NODE_NAME": env.str("RELAYOPS_NODE_NAME", default=socket.gethostname())[:100],
    # A drain runs this long, then hands over to a successor (must stay well under Q_CLUSTER timeout).
    "DRAIN_SECONDS": env.float("RELAYOPS_DRAIN_SECONDS", default=20.0),
    # Idle drains wait on LISTEN/NOTIFY; they also look at least this often (SQLite: the only wake-up).
    "DRAIN_POLL_SECONDS": env.float("RELAYOPS_DRAIN_POLL_SECONDS", default=5.0),
    # Where the drains' LISTEN connections go (a postgresql:// URL of the same database); empty: where
    # DATABASE_URL goes. Set it when DATABASE_URL is a transaction-mode pooler (PgBouncer), which loses
    # a LISTEN at the end of its transaction: docs/scaling.md. Checked at start-up (relayops.E030).
    "LISTEN_DATABASE_URL": env.str("RELAYOPS_LISTEN_DATABASE_URL", default=""),
    # How long the relay holds a claimed outbox row before another relay may take it.
    "OUTBOX_CLAIM_SECONDS": env.float("RELAYOPS_OUTBOX_CLAIM_SECONDS", default=30.0),
    # Under load a drain relays its commits in batches: at most this many events per relay pass, and
    # at most this long after its last pass while jobs keep coming (an idle drain relays at once).
    "OUTBOX_BATCH_SIZE": env.int("RELAYOPS_OUTBOX_BATCH_SIZE", default=100),
    "OUTBOX_BATCH_WINDOW_SECONDS": env.float("RELAYOPS_OUTBOX_BATCH_WINDOW_SECONDS", default=0.05),
    # On SIGTERM running jobs get this long to finish; then their leases are released (no attempt).
    "SHUTDOWN_GRACE_SECONDS": env.float("RELAYOPS_SHUTDOWN_GRACE_SECONDS", default=25.0),
    # A worker whose peak memory grew past this exits between two drains; the sentinel spawns a fresh one.
    "WORKER_MAX_RSS_MB": env.float("RELAYOPS_WORKER_MAX_RSS_MB", default=512.0),
    # relayops_health fails when no drain of the node was seen (idle drains record every 2 s), or due
    # jobs saw no progress, for this long, while the node holds no live lease.
    "HEALTH_STALE_SECONDS": env.float("RELAYOPS_HEALTH_STALE_SECONDS", default=15.0),
    # What the drains run (docs/extraction.md): rules, llm or a dotted path; and who receives the outbox.
    "EXTRACTOR": env.str("RELAYOPS_EXTRACTOR", default="rules"),
    "PUBLISHERS": env.list("RELAYOPS_PUBLISHERS", default=["review-handoff", "webhooks.publisher.WebhookPublisher"]),
    # A failed publication (a webhook's non-2xx or connection error) is retried after a backoff that
    # doubles from OUTBOX_BACKOFF_SECONDS up to OUTBOX_BACKOFF_MAX_SECONDS; at OUTBOX_MAX_FAILURES the
    # event is parked (the admin's outbox page; an operator redelivers it).
    "OUTBOX_MAX_FAILURES": env.int("RELAYOPS_OUTBOX_MAX_FAILURES", default=10),
    "OUTBOX_BACKOFF_SECONDS": env.float("RELAYOPS_OUTBOX_BACKOFF_SECONDS", default=10.0),
    "OUTBOX_BACKOFF_MAX_SECONDS": env.float("RELAYOPS_OUTBOX_BACKOFF_MAX_SECONDS", default=3600.0),
    # Webhooks (docs/webhooks.md): one POST's timeout; whether endpoints may be loopback or private
    # addresses (refused by default), or link-local and cloud-metadata addresses (refused by default);
    # the Fernet keys encrypting endpoint secrets (empty: one derived from SECRET_KEY and its fallbacks).
    "WEBHOOK_TIMEOUT_SECONDS": env.float("RELAYOPS_WEBHOOK_TIMEOUT_SECONDS", default=5.0),
    "WEBHOOK_ALLOW_PRIVATE": env.bool("RELAYOPS_WEBHOOK_ALLOW_PRIVATE", default=False),
    "WEBHOOK_ALLOW_LINK_LOCAL": env.bool("RELAYOPS_WEBHOOK_ALLOW_LINK_LOCAL", default=False),
    "WEBHOOK_SECRET_KEYS": env.list("RELAYOPS_WEBHOOK_SECRET_KEYS", default=[]),
    # The LLM extractor: any OpenAI-compatible chat-completions server.
    "LLM_BASE_URL": env.str("RELAYOPS_LLM_BASE_URL", default=""),
    "LLM_MODEL": env.str("RELAYOPS_LLM_MODEL", default=""),
    "LLM_API_KEY": env.str("RELAYOPS_LLM_API_KEY", default=""),
    "LLM_TIMEOUT_SECONDS": env.float("RELAYOPS_LLM_TIMEOUT_SECONDS", default=60.0),
    "LLM_RESPONSE_FORMAT": env.str("RELAYOPS_LLM_RESPONSE_FORMAT", default="json_schema"),
    "LLM_MAX_OUTPUT_TOKENS": env.int("RELAYOPS_LLM_MAX_OUTPUT_TOKENS", default=2000),
    "LLM_COST_PER_1K_INPUT_TOKENS": _optional("RELAYOPS_LLM_COST_PER_1K_INPUT_TOKENS", Decimal),
    "LLM_COST_PER_1K_OUTPUT_TOKENS": _optional("RELAYOPS_LLM_COST_PER_1K_OUTPUT_TOKENS", Decimal),
    # The ceiling per document (one job): an attempt that would start past it is not made.
    "MAX_TOKENS_PER_DOCUMENT": _optional("RELAYOPS_MAX_TOKENS_PER_DOCUMENT", int, default="100000"),
    "MAX_COST_PER_DOCUMENT": _optional("RELAYOPS_MAX_COST_PER_DOCUMENT", Decimal),
    # The ingest API refuses bodies larger than this (413).
    "INGEST_MAX_BYTES": env.int("RELAYOPS_INGEST_MAX_BYTES", default=1024 * 1024),
}
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, RELAYOPS["INGEST_MAX_BYTES"])
if RELAYOPS["CRASH_POINTS"] and not DEBUG and not RELAYOPS["CRASH_POINTS_FORCE"]:
    raise ImproperlyConfigured(
        "RELAYOPS_CRASH_POINTS makes workers kill themselves: refused with DEBUG off. "
        "Set RELAYOPS_CRASH_POINTS_FORCE=1 as well if you really mean it."
    )

# --- django-q2: the process host only (see docs/architecture.md) -----------------------------------
# Workers run drains for their whole life and never read django-q2's task queue; nothing is enqueued
# and the scheduler is off (the workers sweep themselves), so the broker has no queue at all and the
# pusher's poll asks the database nothing (pipeline.runtime.broker).
# timeout > drain budget + the longest extraction a drain may start near its end: the sentinel ends a
# worker whose drain overran it (pipeline.runtime.host re-arms its timer before each drain).
Q_CLUSTER = {
    "name": "relayops",
    "orm": "default",
    "broker_class": "pipeline.runtime.broker.DrainsOnly",
    "workers": env.int("RELAYOPS_Q_WORKERS", default=2),
    "queue_limit": env.int("RELAYOPS_Q_WORKERS", default=2),
    "bulk": 1,
    "poll": 5,
    "scheduler": False,
    "timeout": env.int("RELAYOPS_Q_TIMEOUT", default=330),
    "retry": env.int("RELAYOPS_Q_RETRY", default=390),
    "ack_failures": True,
    "max_attempts": 1,
    "save_limit": 100,
    "recycle": 200,
    "catch_up": False,
    "ALT_CLUSTERS": {},
}

# --- Logging: structured (structlog) -------------------------------------------------------------
# auto: console lines when stderr is a terminal (a person watching), JSON otherwise (a supervisor or a
# log shipper collecting; it also costs half the CPU per line: docs/performance.md).
LOG_FORMAT = env.str("RELAYOPS_LOG_FORMAT", default="auto")
if LOG_FORMAT not in ("auto", "console", "json"):
    raise ImproperlyConfigured(f"RELAYOPS_LOG_FORMAT must be auto, console or json, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {
            "()": "relayops.logging.Formatter",
            "processor": "ext://relayops.logging.renderer",
            "foreign_pre_chain": "ext://relayops.logging.pre_chain",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # Django's own default adds a plain console handler to "django" when DEBUG is on, which printed
        # every django.* line twice (plain, then structured): its records go to the root handler only.
        "django": {"handlers": [], "level": env.str("LOG_LEVEL", default="INFO"), "propagate": True},
        "django-q": {"level": env.str("DJANGO_Q_LOG_LEVEL", default="WARNING")},
        "axes": {"level": "WARNING"},  # failed sign-ins (username and address, never the password) and lockouts
    },
}
