"""Test settings: PostgreSQL by default (override with DATABASE_URL), warnings are errors.

Every run creates its own test database (``test_relayops_<host>_<pid>_<random>``), so two runs on one
server never collide; tests/conftest.py drops those left behind by runs of this host that died.
"""

import hashlib
import os
import secrets
import socket

os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/relayops")
os.environ.setdefault("RELAYOPS_ENV_FILE", os.devnull)  # a checkout's .env never reaches the tests
os.environ.setdefault("SECRET_KEY", "relayops-tests-only-" + "0123456789abcdefghijklmnopqrstuvwxyz")

from relayops.settings import *  # noqa: E402,F403

TEST_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
TEST_DATABASE_PREFIX = f"test_relayops_{TEST_HOST}_"
DATABASES["default"]["TEST"] = {"NAME": f"{TEST_DATABASE_PREFIX}{os.getpid()}_{secrets.token_hex(3)}"}  # noqa: F405

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Static files straight from the apps (no collectstatic before a test run).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
# Webhook tests post to receivers on loopback; production refuses loopback and private targets.
RELAYOPS["WEBHOOK_ALLOW_PRIVATE"] = True  # noqa: F405
# Every request reads the dashboard afresh: tests change rows between two requests (a test of the
# cache turns it on).
RELAYOPS["DASHBOARD_CACHE_SECONDS"] = 0.0  # noqa: F405
