"""Count the SQL statements a ``manage.py`` command's processes send through Django, for the benchmarks.

Usage (by bench/compare.py): python bench/statement_counter.py COUNTER_FILE qcluster
Runs ``manage.py ARGS...`` in this process after hooking every Django database connection any of its
processes or threads opens (``connection_created``) with an execute wrapper that counts statements
into a shared, file-backed table: one (pid, count) slot per process, written only by that process,
so no lock is needed and the benchmark reads the file while the cluster runs. Forked workers inherit
the mapping. Connections opened outside Django (the drains' LISTEN connections) are not counted.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from pathlib import Path

SLOTS = 1021
SLOT = struct.Struct("qq")  # pid, statements
SIZE = SLOTS * SLOT.size


def create(path: Path) -> None:
    """An empty counter file."""
    path.write_bytes(b"\0" * SIZE)


def read(path: Path) -> dict[int, int]:
    """Statements counted so far, by process id."""
    data = path.read_bytes()
    counts = {}
    for n in range(SLOTS):
        pid, count = SLOT.unpack_from(data, n * SLOT.size)
        if pid:
            counts[pid] = count
    return counts


class _Counter:
    def __init__(self, path: str) -> None:
        with open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), SIZE)  # MAP_SHARED: forked children write the same pages
        self._pid = 0
        self._offset = 0
        self._count = 0

    def _slot(self) -> None:
        pid = os.getpid()
        start = pid % SLOTS
        for probe in range(SLOTS):
            offset = ((start + probe) % SLOTS) * SLOT.size
            owner, _ = SLOT.unpack_from(self._map, offset)
            if owner in (0, pid):
                SLOT.pack_into(self._map, offset, pid, 0)
                self._pid, self._offset, self._count = pid, offset, 0
                return
        raise RuntimeError("statement counter full")

    def __call__(self, execute, sql, params, many, context):  # noqa: ANN001 - Django's wrapper signature
        if self._pid != os.getpid():
            self._slot()
        self._count += 1
        SLOT.pack_into(self._map, self._offset, self._pid, self._count)
        return execute(sql, params, many, context)


def main() -> None:
    path, *command = sys.argv[1:]
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    os.chdir(root)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayops.settings")
    counter = _Counter(path)

    from django.db.backends.signals import connection_created

    def hook(sender, connection, **kwargs):  # noqa: ANN001
        if counter not in connection.execute_wrappers:
            connection.execute_wrappers.append(counter)

    connection_created.connect(hook, weak=False)
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", *command])


if __name__ == "__main__":
    main()
