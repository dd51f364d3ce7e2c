"""django-q2 kick tasks: the durable half of the doorbell. Disabled until the cluster is wired."""

from __future__ import annotations


def kick(channel: str) -> None:
    """Enqueue a content-free task that starts a drain for ``channel`` (see pipeline.tasks)."""
    return None
