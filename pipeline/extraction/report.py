"""What one attempt's extraction is recorded as: the extractor, the model, the prompt template's
hash, the tokens, the inference latency and, when prices are set, the cost. Never content.

``pipeline.queue`` writes it on the attempt row in the transaction that closes the attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from pipeline.extraction.document import Usage

THOUSAND = Decimal(1000)
COST_PLACES = Decimal("0.000001")


@dataclass(frozen=True)
class Prices:
    """What a thousand input and output tokens cost (any currency, the same for both); None: unpriced."""

    input_per_1k: Decimal | None = None
    output_per_1k: Decimal | None = None

    @classmethod
    def from_settings(cls) -> Prices:
        options = settings.RELAYOPS
        return cls(options["LLM_COST_PER_1K_INPUT_TOKENS"], options["LLM_COST_PER_1K_OUTPUT_TOKENS"])

    @property
    def priced(self) -> bool:
        return self.input_per_1k is not None or self.output_per_1k is not None

    def cost(self, usage: Usage) -> Decimal | None:
        """The cost of ``usage``; None when unpriced or when no tokens were counted."""
        if not self.priced or (usage.input_tokens is None and usage.output_tokens is None):
            return None
        spent = (Decimal(usage.input_tokens or 0) * (self.input_per_1k or 0)
                 + Decimal(usage.output_tokens or 0) * (self.output_per_1k or 0)) / THOUSAND
        return spent.quantize(COST_PLACES)


REPORT_COLUMNS = ("extractor", "model_name", "prompt_hash", "input_tokens", "output_tokens", "inference_seconds",
                  "cost")  # the attempt row's columns a report fills (AttemptReport.columns)


@dataclass(frozen=True)
class AttemptReport:
    extractor: str
    usage: Usage = field(default_factory=Usage)
    inference_seconds: float | None = None
    cost: Decimal | None = None

    def columns(self) -> dict[str, Any]:
        """The attempt row's columns this report fills (``pipeline.models.Attempt``)."""
        return {
            "extractor": self.extractor[:200], "model_name": self.usage.model[:200],
            "prompt_hash": self.usage.prompt_hash[:64], "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens, "inference_seconds": self.inference_seconds, "cost": self.cost,
        }
