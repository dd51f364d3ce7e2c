"""What the settings choose: the extractor (``RELAYOPS_EXTRACTOR``) and the outbox's publishers
(``RELAYOPS_PUBLISHERS``). The drains run with them; a system check loads them at start-up, so a
wrong name stops every command with a clear error instead of failing jobs.

An extractor is ``rules``, ``llm`` or the dotted path of your own: a function called with
``(document, checkpoint)``, or a class instantiated with no arguments whose instances are. A
publisher is ``review-handoff`` (the built-in deduping consumer that creates the review) or the
dotted path of a class instantiated with no arguments whose instances have ``publish(event)``.
Several publishers receive every event in their order; delivery is at-least-once to each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from pipeline.events import BatchOutcome, Event, Publisher, at_least_one, declared_wants, publish_each
from pipeline.extraction.document import Extractor
from pipeline.extraction.rules import invoice_extractor
from pipeline.relay import ConsumerPublisher

REVIEW_HANDOFF = "review-handoff"


def _llm() -> Extractor:
    # Imported when chosen: the LLM extractor brings an HTTP client no other extractor needs.
    from pipeline.extraction.llm import LLMConfig, LLMExtractor

    config = LLMConfig.from_settings()
    problems = config.problems()
    if problems:
        raise ImproperlyConfigured("RELAYOPS_EXTRACTOR=llm: " + "; ".join(problems))
    return LLMExtractor(config)


BUILTIN_EXTRACTORS: dict[str, Callable[[], Extractor]] = {"rules": lambda: invoice_extractor, "llm": _llm}
BUILTIN_PUBLISHERS: dict[str, Callable[[], Publisher]] = {REVIEW_HANDOFF: ConsumerPublisher}


def _import(setting: str, spec: object) -> Any:
    if not isinstance(spec, str) or not spec.strip():
        raise ImproperlyConfigured(f"{setting} is empty: name a built-in or a dotted path")
    try:
        return import_string(spec.strip())
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting}={spec!r}: not a built-in, and it does not import ({exc})") from exc


def load_extractor(spec: str) -> Extractor:
    """The extractor ``spec`` names; ImproperlyConfigured saying what is wrong otherwise."""
    if spec in BUILTIN_EXTRACTORS:
        return BUILTIN_EXTRACTORS[spec]()
    target = _import("RELAYOPS_EXTRACTOR", spec)
    extractor = target() if isinstance(target, type) else target
    if not callable(extractor):
        raise ImproperlyConfigured(f"RELAYOPS_EXTRACTOR={spec!r} is not callable: it must take (document, checkpoint)")
    return extractor


def load_publisher(spec: str) -> Publisher:
    if spec in BUILTIN_PUBLISHERS:
        return BUILTIN_PUBLISHERS[spec]()
    target = _import("RELAYOPS_PUBLISHERS", spec)
    publisher = target() if isinstance(target, type) else target
    if not callable(getattr(publisher, "publish", None)):
        raise ImproperlyConfigured(f"RELAYOPS_PUBLISHERS: {spec!r} has no publish(event) method")
    return publisher


class FanoutPublisher:
    """Publishes each event to every publisher in order. One publisher's failure does not keep the event
    from the others: each is tried, then the first failure is raised, so the event stays pending and the
    relay publishes it again later, to all of them (each must dedupe by event id: the review consumer
    remembers it, the webhook publisher skips the endpoints that already have it)."""

    def __init__(self, publishers: Sequence[Publisher]) -> None:
        self.publishers = tuple(publishers)

    @property
    def claim_facts(self) -> dict[str, str]:
        """Every publisher's claim facts (pipeline.events.Publisher)."""
        return {name: sql for p in self.publishers for name, sql in (getattr(p, "claim_facts", None) or {}).items()}

    @property
    def wants(self) -> str | None:
        """When any publisher wants an event (pipeline.events.Publisher), or None if one does not say."""
        wants = [declared_wants(p) for p in self.publishers]
        if not all(wants):
            return None
        return " OR ".join(f"({w})" for w in wants)

    def split_review_handoff(self) -> tuple[bool, Publisher | None]:
        """(whether the review consumer comes first, the publishers after it): the relay then does the
        consumer's work in its claim and hands the events to the others only."""
        if type(self.publishers[0]) is not ConsumerPublisher:  # a subclass publishes its own way
            return False, self
        rest = self.publishers[1:]
        return True, (None if not rest else rest[0] if len(rest) == 1 else FanoutPublisher(rest))

    def publish(self, event: Event) -> None:
        first: Exception | None = None
        for publisher in self.publishers:
            try:
                publisher.publish(event)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    def publish_batch(self, events: Sequence[Event], out_of_time: Callable[[], bool]) -> BatchOutcome:
        """Each publisher gets the batch in turn (its own ``publish_batch`` where it has one); an event
        is published when every publisher published it, failed when any failed, and given back untried
        when one ran out of time before it."""
        outcome = BatchOutcome()
        for publisher in self.publishers:  # each tries one event at least (time a slow one spent is not theirs)
            outcome.merge(publish_each(publisher, events, at_least_one(out_of_time)))
        return outcome


def load_publishers(specs: Sequence[str]) -> Publisher:
    if isinstance(specs, str) or not specs:
        raise ImproperlyConfigured(f"RELAYOPS_PUBLISHERS must list at least one publisher (e.g. {REVIEW_HANDOFF})")
    publishers = [load_publisher(spec) for spec in specs]
    return publishers[0] if len(publishers) == 1 else FanoutPublisher(publishers)


def configured_extractor() -> Extractor:
    return load_extractor(settings.RELAYOPS["EXTRACTOR"])


def configured_publisher() -> Publisher:
    return load_publishers(settings.RELAYOPS["PUBLISHERS"])
