"""What a command says when RelayOps cannot start or reach its database: one line with the fix, not a
traceback. ``manage.py`` asks ``hint`` about any exception that ends a command (``--traceback`` skips it)."""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

MISSING_DATABASE = re.compile(r'database "(?P<name>[^"]+)" does not exist')
MISSING_TABLE = re.compile(r'no such table|relation "[^"]+" does not exist')
UNREACHABLE = re.compile(r"connection refused|could not connect|connection failed|No such file or directory", re.I)


def hint(exc: BaseException) -> str | None:
    """One line saying what is wrong and the command that fixes it, or None for anything else."""
    if isinstance(exc, ImproperlyConfigured):
        return f"RelayOps cannot start: {exc}"
    if not isinstance(exc, DatabaseError):
        return None
    text = str(exc)
    if missing := MISSING_DATABASE.search(text):
        return f'RelayOps: the database "{missing["name"]}" does not exist. Create it: {_createdb(missing["name"])}'
    if MISSING_TABLE.search(text):
        return "RelayOps: the database has no tables yet. Create them: ./run migrate (or python manage.py migrate)"
    if UNREACHABLE.search(text):
        return f"RelayOps: cannot reach the database at {_where()}. Is PostgreSQL running? (DATABASE_URL sets where)"
    return None


def _server() -> dict[str, str]:
    from django.conf import settings

    db = settings.DATABASES["default"]
    return {"host": str(db.get("HOST") or "127.0.0.1"), "port": str(db.get("PORT") or 5432), "user": str(db.get("USER") or "")}


def _where() -> str:
    server = _server()
    return f"{server['host']}:{server['port']}"


def _createdb(name: str) -> str:
    server = _server()
    user = f" -U {server['user']}" if server["user"] else ""
    return f"createdb -h {server['host']} -p {server['port']}{user} {name}  (then: python manage.py migrate)"
