"""RelayOps settings, read from the environment (django-environ).

With no ``DATABASE_URL`` RelayOps runs on an embedded SQLite file (WAL, immediate transactions) so a
newcomer needs no server; production and the test suite run on PostgreSQL.
"""

from __future__ import annotations

import socket
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("Set SECRET_KEY (or DEBUG=1 for a local run).")
    SECRET_KEY = "relayops-insecure-local-only"
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Our apps in their layers: each may import those listed before it, never one after it.
INSTALLED_APPS = [
    "console.apps.ConsoleAdminConfig",  # django.contrib.admin, serving console.site.RelayOpsAdminSite
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_q",
    "tenancy",
    "pipeline",
    "dlq",
    "console",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "relayops.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"

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
    # How long the relay holds a claimed outbox row before another relay may take it.
    "OUTBOX_CLAIM_SECONDS": env.float("RELAYOPS_OUTBOX_CLAIM_SECONDS", default=30.0),
    # On SIGTERM running jobs get this long to finish; then their leases are released (no attempt).
    "SHUTDOWN_GRACE_SECONDS": env.float("RELAYOPS_SHUTDOWN_GRACE_SECONDS", default=25.0),
    # A worker whose peak memory grew past this exits between two drains; the sentinel spawns a fresh one.
    "WORKER_MAX_RSS_MB": env.float("RELAYOPS_WORKER_MAX_RSS_MB", default=512.0),
    # relayops_health fails when no drain of the node was seen (idle drains record every 2 s), or due
    # jobs saw no progress, for this long, while the node holds no live lease.
    "HEALTH_STALE_SECONDS": env.float("RELAYOPS_HEALTH_STALE_SECONDS", default=15.0),
}
if RELAYOPS["CRASH_POINTS"] and not DEBUG and not RELAYOPS["CRASH_POINTS_FORCE"]:
    raise ImproperlyConfigured(
        "RELAYOPS_CRASH_POINTS makes workers kill themselves: refused with DEBUG off. "
        "Set RELAYOPS_CRASH_POINTS_FORCE=1 as well if you really mean it."
    )

# --- django-q2: the process host only (see docs/architecture.md) -----------------------------------
# Workers run drains for their whole life and never read django-q2's task queue; nothing is enqueued
# and the scheduler is off (the workers sweep themselves), so the pusher only polls an empty broker.
# timeout > drain budget + the longest extraction a drain may start near its end: the sentinel ends a
# worker whose drain overran it (pipeline.runtime.host re-arms its timer before each drain).
Q_CLUSTER = {
    "name": "relayops",
    "orm": "default",
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
LOG_FORMAT = env.str("RELAYOPS_LOG_FORMAT", default="console")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {
            "()": "structlog.stdlib.ProcessorFormatter",
            "processor": "ext://relayops.logging.renderer",
            "foreign_pre_chain": "ext://relayops.logging.pre_chain",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django-q": {"level": env.str("DJANGO_Q_LOG_LEVEL", default="WARNING")}},
}
