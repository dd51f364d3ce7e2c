"""Named crash points. Inert unless enabled; either raises CrashSimulated or SIGKILLs the process."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Mapping

from pipeline.errors import CrashSimulated, InvalidInputError

CRASH_POINTS = frozenset({"after_lease", "after_extract", "after_commit_before_ack", "after_publish_before_mark"})


class CrashInjector:
    """Crashes at ``points`` (name -> probability). ``kill=True`` sends SIGKILL to this process."""

    def __init__(self, points: Mapping[str, float] | None = None, *, kill: bool = False, rng: random.Random | None = None) -> None:
        points = dict(points or {})
        for name, probability in points.items():
            if name not in CRASH_POINTS:
                raise InvalidInputError("crash point", f"unknown point {name!r}; known: {sorted(CRASH_POINTS)}")
            if not 0 <= probability <= 1:
                raise InvalidInputError("crash point", f"{name} probability must be in [0, 1]")
        self.points = points
        self.kill = kill
        self._rng = rng or random.Random()

    @classmethod
    def parse(cls, spec: str, *, kill: bool = True) -> "CrashInjector":
        """Parse ``"after_commit_before_ack:0.1,after_publish_before_mark:0.05"``."""
        points: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            name, _, probability = item.partition(":")
            try:
                points[name.strip()] = float(probability) if probability else 1.0
            except ValueError as exc:
                raise InvalidInputError("RELAYOPS_CRASH_POINTS", f"bad probability in {item!r}") from exc
        return cls(points, kill=kill)

    def __call__(self, point: str) -> None:
        probability = self.points.get(point, 0.0)
        if probability and self._rng.random() < probability:
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise CrashSimulated(point)


NO_CRASH = CrashInjector()
