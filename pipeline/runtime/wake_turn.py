"""One claim at a time on a host for the drains a jobs doorbell woke.

A ``NOTIFY`` reaches every parked drain (PostgreSQL cannot address one listener): without a turn each
would claim, and all but one would find nothing. So a drain woken by the jobs doorbell takes the host's
turn (an exclusive ``flock`` on a small file shared by the drains of one database on this host) before
its claim, and gives it back as soon as the claim answered, writing down the claim's snapshot (which
transactions it saw) and whether it saw another job waiting. Every jobs doorbell carries the id of the
transaction that rang it. The next woken drain to take the turn reads the record: if that claim saw no
other job waiting and its snapshot saw every transaction whose doorbell woke this drain, each of their
jobs is taken or not claimable, so the drain claims nothing and parks again (a lost race, which it
re-checks within a quarter second, as always). Otherwise it claims as before. No clock is compared:
the snapshot says exactly what the claim saw. The turn is held for one claim's round trip; the kernel
releases a dead holder's lock. Best effort: where the file cannot be opened, there is no turn and every
woken drain claims.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import tempfile
from pathlib import Path

from django.db import connection

from relayops.logging import get_logger

log = get_logger(__name__)

HEADER = struct.Struct("=BI")  # the last turn's claim: saw more waiting, then its snapshot's length and text
MAX_SNAPSHOT = 8192  # a longer snapshot (thousands of transactions in flight) is not kept: the next drain claims
UNKNOWN: tuple[str | None, bool] = (None, True)


def path_for_database() -> Path:
    """The turn file of this host's drains on Django's default database (its host, port and name: the
    drains of another database, or of another test run's database, have their own)."""
    params = connection.settings_dict
    key = "\0".join(str(params.get(k) or "") for k in ("HOST", "PORT", "NAME"))
    return Path(tempfile.gettempdir()) / f"relayops-wake-turn-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class WakeTurn:
    """The host's turn to claim. ``take()`` blocks while another drain's claim is in flight (one round
    trip) and returns the last record; ``give_back(began, more_waiting)`` records this drain's claim and
    releases the turn (``give_back()`` without a claim releases it and records nothing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._held = False
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # no turn: every woken drain claims
            log.warning("drain.wake_turn_unavailable", error_type=type(exc).__name__)

    @classmethod
    def for_database(cls) -> WakeTurn:
        return cls(path_for_database())

    @property
    def available(self) -> bool:
        return self._fd is not None

    def take(self) -> tuple[str | None, bool]:
        """Wait for the turn; the last claim's (snapshot, saw more waiting), or UNKNOWN."""
        assert self._fd is not None and not self._held
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._held = True
        raw = os.pread(self._fd, HEADER.size + MAX_SNAPSHOT, 0)
        if len(raw) < HEADER.size:
            return UNKNOWN
        more, length = HEADER.unpack_from(raw)
        if not length or HEADER.size + length > len(raw):
            return UNKNOWN
        return raw[HEADER.size:HEADER.size + length].decode("ascii", "replace"), bool(more)

    def give_back(self, snapshot: str | None = None, more_waiting: bool = True, *, claimed: bool = False) -> None:
        """Release the turn; with ``claimed``, first record this drain's claim (an unknown snapshot is
        recorded as such, so the next drain claims)."""
        if self._fd is None or not self._held:
            return
        try:
            if claimed:
                text = (snapshot or "").encode("ascii", "replace")
                if len(text) > MAX_SNAPSHOT:
                    text = b""
                os.pwrite(self._fd, HEADER.pack(more_waiting, len(text)) + text, 0)
        finally:
            self._held = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            self.give_back()
            os.close(self._fd)
            self._fd = None


def transaction_ids(payloads: set[str] | None) -> frozenset[int] | None:
    """The transaction ids a wake-up's jobs doorbells carried; None when one carried none (say, a
    ringer of an older version): then nothing can be told, and the drain claims."""
    if not payloads:
        return None
    try:
        return frozenset(int(payload) for payload in payloads)
    except ValueError:
        return None


def seen_by(snapshot: str, xid: int) -> bool:
    """Whether committed transaction ``xid`` is visible in ``snapshot`` (``pg_snapshot`` text,
    ``xmin:xmax:xip,...``): before xmin, or before xmax and not in progress then."""
    xmin, xmax, in_progress = snapshot.split(":")
    if xid < int(xmin):
        return True
    return xid < int(xmax) and str(xid) not in in_progress.split(",")


def nothing_left_for(record: tuple[str | None, bool], xids: frozenset[int] | None) -> bool:
    """Whether the recorded claim saw no other job waiting and saw every transaction in ``xids``."""
    snapshot, more = record
    if more or not snapshot or not xids:
        return False
    try:
        return all(seen_by(snapshot, xid) for xid in xids)
    except ValueError:  # not a snapshot: nothing can be told
        return False
