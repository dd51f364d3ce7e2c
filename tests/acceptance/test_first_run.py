"""The first hour, as subprocesses: every command the README and the demo banner name works on the
embedded default with no extra variable; production still refuses to start without a strong
SECRET_KEY; a command that cannot reach its database says how to fix it in one line; and the
documented production settings pass ``check --deploy``."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import uuid

import pytest

from tests.acceptance.conftest import ROOT

pytestmark = pytest.mark.acceptance

CLEARED = ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DEBUG", "RELAYOPS_ENV_FILE", "HTTPS")


def local_env(tmp_path, **extra: str) -> dict[str, str]:
    """A newcomer's shell: no DATABASE_URL, no SECRET_KEY, no DEBUG; this test's own .env and SQLite file."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update({"RELAYOPS_ENV_FILE": str(tmp_path / ".env"), "RELAYOPS_SQLITE_PATH": str(tmp_path / "relayops.sqlite3"),
                "LOG_LEVEL": "WARNING", **extra})
    return env


def run(argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "manage.py", *args], env)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The command's complaint: exactly one line on stderr, no traceback."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_every_command_the_readme_names_works_on_the_embedded_default(tmp_path):
    env = local_env(tmp_path)
    first = run(["./run", "relayops_status"], env)
    assert first.returncode == 2
    assert "Wrote" in first.stderr and "the database has no tables yet. Create them: ./run migrate" in first.stderr
    assert "Traceback" not in first.stderr
    key = re.search(r"^SECRET_KEY=(\S+)$", (tmp_path / ".env").read_text(), re.M)
    assert key and len(key[1]) >= 50 and len(set(key[1])) >= 5
    assert (tmp_path / ".env").stat().st_mode & 0o077 == 0  # readable by its owner only
    assert run(["git", "check-ignore", "-q", ".env"], env).returncode == 0  # never committed

    assert run(["./run", "migrate"], env).returncode == 0
    expectations = [
        (["relayops_status"], 0, "RelayOps status at"),
        (["relayops_health"], 1, "unhealthy: no drain"),
        (["create_operator", "--help"], 0, "--add-tenant"),
        (["create_operator", "alice", "--tenant", "acme"], 0, "Created operator alice for tenants: acme"),
        (["qcluster", "--help"], 0, "usage:"),
        (["relayops_demo", "--help"], 0, "--setup-only"),
        (["help"], 0, "relayops_status"),
    ]
    for argv, code, shown in expectations:
        result = run(["./run", *argv], env)
        assert (result.returncode, "Traceback" in result.stderr) == (code, False), (argv, result.stderr)
        assert shown in result.stdout + result.stderr, (argv, result.stdout, result.stderr)
    assert (tmp_path / ".env").read_text().count("SECRET_KEY=") == 1
    assert re.search(r"^SECRET_KEY=(\S+)$", (tmp_path / ".env").read_text(), re.M)[1] == key[1]  # written once


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = local_env(tmp_path, DEBUG="0", RELAYOPS_ENV_FILE=str(tmp_path / "absent.env"))
    result = manage("relayops_status", env=env)
    assert result.returncode == 2
    assert one_line(result).startswith("RelayOps cannot start: Set SECRET_KEY.")
    assert not (tmp_path / "absent.env").exists()  # only ./run writes one, for a local checkout


@pytest.mark.parametrize("key", [
    "short-but-random-7f3a", "a" * 64, "abcd" * 20, "django-insecure-" + secrets.token_urlsafe(50),
])
def test_a_weak_secret_key_is_refused_with_debug_off(tmp_path, key):
    result = manage("check", env=local_env(tmp_path, DEBUG="0", SECRET_KEY=key))
    assert result.returncode == 2
    assert one_line(result).startswith("RelayOps cannot start: SECRET_KEY is too weak")
    assert manage("check", env=local_env(tmp_path, DEBUG="1", SECRET_KEY=key)).returncode == 0  # a local run


def test_a_strong_secret_key_starts(tmp_path):
    result = manage("check", env=local_env(tmp_path, DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50)))
    assert result.returncode == 0, result.stderr


def test_a_missing_postgresql_database_gets_a_one_line_createdb_hint(tmp_path):
    name = f"relayops_missing_{uuid.uuid4().hex[:8]}"
    env = local_env(tmp_path, DATABASE_URL=f"postgresql://postgres@127.0.0.1:5432/{name}",
                    SECRET_KEY=secrets.token_urlsafe(50))
    for command in (["relayops_status"], ["migrate"]):
        result = manage(*command, env=env)
        assert result.returncode == 2, result.stderr
        assert one_line(result) == (f'RelayOps: the database "{name}" does not exist. Create it: createdb -h '
                                    f"127.0.0.1 -p 5432 -U postgres {name}  (then: python manage.py migrate)")


def documented_production_env() -> dict[str, str]:
    """The ``/etc/relayops.env`` block of docs/operations.md, "Deploying behind TLS"."""
    text = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"## Deploying behind TLS.*?```ini\n# /etc/relayops.env\n(.*?)```", text, re.S)
    assert block, "docs/operations.md lost its production settings block"
    pairs = [line.split("=", 1) for line in block[1].splitlines() if line and not line.startswith("#")]
    return dict(pairs)


def test_the_documented_production_settings_pass_the_deploy_check(tmp_path):
    documented = documented_production_env()
    assert documented["DEBUG"] == "0" and documented["HTTPS"] == "1"
    refused = manage("check", "--deploy", env=local_env(tmp_path, **documented))
    assert refused.returncode == 2 and "SECRET_KEY" in one_line(refused)  # the placeholder is not a key

    env = local_env(tmp_path, **{**documented, "SECRET_KEY": secrets.token_urlsafe(50)})
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout

    plain = manage("check", "--deploy", env={**env, "HTTPS": "0", "SECURE_HSTS_PRELOAD": "0"})
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in plain.stdout + plain.stderr  # without TLS the same check does complain


@pytest.mark.parametrize("table, row", [
    ("dlq_auditentry", {"at": "2026-03-01 09:00:00", "action": "pause_intake", "tenant": "acme", "operator": "ops",
                        "reason": "", "detail": ""}),
])
def test_on_the_embedded_default_the_audit_stays_append_only(tmp_path, table, row):
    """SQLite drops a table's triggers when a migration remakes the table: after every migration the
    audit still refuses UPDATE and DELETE."""
    import sqlite3

    env = local_env(tmp_path, DEBUG="1")
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    with sqlite3.connect(tmp_path / "relayops.sqlite3") as db:
        db.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
        for statement in (f"UPDATE {table} SET tenant = 'globex'", f"DELETE FROM {table}"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(statement)
        assert db.execute(f"SELECT tenant FROM {table}").fetchall() == [("acme",)]
