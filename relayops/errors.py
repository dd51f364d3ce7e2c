"""The root of RelayOps' exception hierarchy, shared by every app. Each class's docstring is its default message."""

from __future__ import annotations


class RelayOpsError(Exception):
    """A RelayOps operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class InvalidInputError(RelayOpsError, ValueError):
    """An argument is invalid. ``field`` names it; nothing was written."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")
