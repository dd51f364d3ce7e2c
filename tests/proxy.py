"""A TCP forwarder on loopback in front of PostgreSQL, for database faults a test controls.

``stop()`` drops every forwarded connection and refuses new ones (the database is "down" for whoever
connects through the proxy), ``start()`` brings it back on the same port. ``cut_after_commit(marker)``
arms a precise fault: the next transaction whose statements contain ``marker`` reaches PostgreSQL,
its COMMIT is executed there, and the connection is cut before the answer reaches the client, so the
client cannot know that its commit landed. A marked statement sent outside ``BEGIN`` (autocommit) is
its own transaction: the cut comes before its answer, which PostgreSQL sends once it has committed.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

COMMIT = b"COMMIT\x00"  # a simple-query COMMIT message, as psycopg sends it
BEGIN = b"BEGIN\x00"
ROLLBACK = b"ROLLBACK\x00"


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket
    saw_marker: bool = False
    cut_pending: bool = False
    in_transaction: bool = False
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class Proxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self.cuts = 0

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", self.port))
        except OSError:
            listener.close()
            raise
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """Refuse new connections and drop every live one."""
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread: closing alone does not
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def cut_after_commit(self, marker: bytes) -> None:
        self._marker = marker

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._upstream, args=(link,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(link,), daemon=True).start()

    def _upstream(self, link: _Link) -> None:
        while not link.closed.is_set():
            try:
                data = link.client.recv(65536)
            except OSError:
                break
            if not data:
                break
            if BEGIN in data:
                link.in_transaction = True
            if self._marker is not None:
                link.saw_marker = link.saw_marker or self._marker in data
                if COMMIT in data or (link.saw_marker and not link.in_transaction):
                    link.cut_pending, link.saw_marker = link.saw_marker, False
            if COMMIT in data or ROLLBACK in data:
                link.in_transaction = False
            try:
                link.server.sendall(data)
            except OSError:
                break
        link.close()

    def _downstream(self, link: _Link) -> None:
        while not link.closed.is_set():
            try:
                data = link.server.recv(65536)
            except OSError:
                break
            if not data:
                break
            if link.cut_pending:  # the server answered the COMMIT: it landed; the client never hears so
                self._marker = None
                self.cuts += 1
                break
            try:
                link.client.sendall(data)
            except OSError:
                break
        link.close()
