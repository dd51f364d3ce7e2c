"""Deploying behind TLS, as docs/operations.md says: collectstatic, gunicorn serving the admin and
WhiteNoise the static files, with the production settings; HTTPS enforced through the proxy's header."""

from __future__ import annotations

import http.client
import secrets
import socket
import subprocess
import sys

import pytest

from tests.acceptance.conftest import ROOT
from tests.acceptance.test_first_run import documented_production_env, local_env
from tests.waiting import wait_for

pytestmark = pytest.mark.acceptance


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(port: int, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path, headers={"Host": "relayops.example.com", **(headers or {})})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def listening(port: int, server: subprocess.Popen[bytes]) -> bool:
    assert server.poll() is None, "gunicorn exited"
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_gunicorn_serves_the_admin_and_whitenoise_the_static_files_behind_tls(tmp_path):
    env = local_env(tmp_path, **{**documented_production_env(), "SECRET_KEY": secrets.token_urlsafe(50),
                                 "STATIC_ROOT": str(tmp_path / "static")})
    env.pop("DATABASE_URL")  # the embedded database stands in for PostgreSQL here
    for command in (["migrate"], ["collectstatic", "--noinput"]):
        done = subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "static" / "console" / "relayops.css.gz").exists()  # compressed by collectstatic

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "relayops.wsgi", "--bind", f"127.0.0.1:{port}",
                               "--workers", "1"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: listening(port, server), timeout=60, what="gunicorn to listen")
        plain = get(port, "/admin/login/")
        assert plain.status == 301 and plain.headers["Location"] == "https://relayops.example.com/admin/login/"
        secure = {"X-Forwarded-Proto": "https"}
        login = get(port, "/admin/login/", secure)
        assert login.status == 200
        assert login.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
        assert "default-src 'none'" in login.headers["Content-Security-Policy"]
        assert "Secure" in login.headers["Set-Cookie"] and "csrftoken" in login.headers["Set-Cookie"]
        css = get(port, "/static/console/relayops.css", {**secure, "Accept-Encoding": "gzip"})
        assert css.status == 200 and css.headers["Content-Encoding"] == "gzip"
        assert get(port, "/static/admin/css/base.css", secure).status == 200
    finally:
        server.terminate()
        server.wait(30)
