"""A private PgBouncer in transaction mode on loopback, in front of one database of the test server.

``start()`` writes its ini into a directory of the test's, runs ``pgbouncer`` in the foreground as a
child (as ``nobody`` when the tests run as root: PgBouncer refuses root) and waits until its admin
console answers; ``stop()`` ends it. ``show("POOLS")`` reads the admin console, which speaks only the
simple query protocol (hence psycopg's client-side cursor). ``BINARY`` is None where PgBouncer is not
installed (Debian: ``apt-get install pgbouncer``; .ci/run installs it).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from tests.waiting import wait_for

BINARY = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")
ADMIN_DATABASE = "pgbouncer"


class PgBouncer:
    def __init__(self, directory: Path, *, database: str, host: str, port: int, user: str, password: str = "",
                 pool_size: int = 2) -> None:
        self.directory = directory
        self.database = database
        self.target = (host, port)
        self.user = user
        self.password = password
        self.pool_size = pool_size
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.proc: subprocess.Popen | None = None
        self.log_path = directory / "pgbouncer.log"

    @property
    def url(self) -> str:
        """The database through PgBouncer, as a DATABASE_URL."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def start(self, timeout: float = 15.0) -> None:
        assert BINARY is not None, "pgbouncer is not installed"
        ini = self._write_config()
        command = [BINARY, ini.name]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "nobody"]  # it reads its files first, then drops to this user
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(command, cwd=self.directory, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        wait_for(lambda: self.proc.poll() is not None or self._answers(), timeout=timeout, what="pgbouncer to answer")
        assert self.proc.poll() is None, f"pgbouncer exited early:\n{self.log()[-3000:]}"

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # SIGTERM: PgBouncer closes every connection and exits
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def show(self, what: str) -> list[dict[str, Any]]:
        """The rows of ``SHOW <what>`` on the admin console, as dicts."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=ADMIN_DATABASE,
                             autocommit=True, connect_timeout=5, cursor_factory=psycopg.ClientCursor) as admin:
            cursor = admin.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description or []]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def _answers(self) -> bool:
        import psycopg

        try:
            self.show("VERSION")
        except psycopg.OperationalError:
            return False
        return True

    def _write_config(self) -> Path:
        host, port = self.target
        server = f"host={host} port={port} dbname={self.database}"
        if self.password:
            server += f" password={self.password}"
        users = self.directory / "users.txt"
        users.write_text(f'"{self.user}" ""\n')
        ini = self.directory / "pgbouncer.ini"
        ini.write_text("\n".join([
            "[databases]",
            f"{self.database} = {server}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",  # loopback only, a throwaway pooler of a test database
            f"auth_file = {users}",
            f"admin_users = {self.user}",
            "pool_mode = transaction",
            # Fewer server connections than the cluster has clients: every client's transactions land
            # on connections other clients used before, so any session state would show.
            f"default_pool_size = {self.pool_size}",
            "max_client_conn = 100",
            "",
        ]))
        return ini
