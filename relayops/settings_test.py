"""Test settings: PostgreSQL by default (override with DATABASE_URL), warnings are errors."""

import os

os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/relayops")
os.environ.setdefault("SECRET_KEY", "relayops-tests-only")

from relayops.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
