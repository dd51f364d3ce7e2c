"""The LLM extractor: an OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, llama.cpp's
server) asked for the invoice schema as JSON, its answer validated with pydantic.

Every failure has a closed code (``reasons.ErrorCode.LLM_*``): timeouts, connection errors, 429 and
5xx are transient (a ``Retry-After`` sets the earliest next attempt); other 4xx, refusals, truncated,
non-JSON and schema-violating answers are permanent. The request never waits past the job's deadline:
its timeout is the configured one or the time left, whichever is shorter, and running out of the
time left cancels the job. No prompt, document or answer is ever logged or put in an error.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

import httpx
import pydantic
from django.conf import settings

from pipeline.clock import Clock, system_clock
from pipeline.errors import JobCancelledError, JobFailure, PermanentError, TransientError
from pipeline.extraction.document import Document, Extraction, Usage
from pipeline.extraction.invoice import InvoiceFields
from pipeline.idempotency import canonical_json
from pipeline.reasons import ErrorCode
from relayops.logging import get_logger

log = get_logger(__name__)

SCHEMA = InvoiceFields.model_json_schema()
SYSTEM_PROMPT = (
    "You read one invoice and answer with a single JSON object holding its fields: invoice_number, "
    "issue_date and due_date (YYYY-MM-DD), vendor (the seller's name), vendor_tax_id (the seller's VAT or "
    "tax id), currency (an ISO 4217 code), line_items (each with description, quantity, unit_price and "
    "amount), subtotal, tax and total. Write amounts as plain decimal numbers: no currency symbols, no "
    "thousands separators. Copy values as printed; never compute or invent one. Answer with JSON only."
)
SCHEMA_HINT = "\nThe JSON object must match this JSON schema:\n{schema}"
USER_TEMPLATE = "The invoice:\n\n{document}"
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
MAX_ANSWER_BYTES = 1024 * 1024


def prompt_hash(response_format: str) -> str:
    """SHA-256 of everything that shapes the prompt except the document: the attempt records it."""
    template = {"system": SYSTEM_PROMPT, "hint": SCHEMA_HINT, "user": USER_TEMPLATE, "schema": SCHEMA,
                "response_format": response_format}
    return hashlib.sha256(canonical_json(template).encode()).hexdigest()


@dataclass(frozen=True)
class LLMConfig:
    base_url: str
    model: str
    api_key: str = ""
    timeout_seconds: float = 60.0
    response_format: str = "json_schema"
    max_output_tokens: int = 2000

    @classmethod
    def from_settings(cls) -> LLMConfig:
        options = settings.RELAYOPS
        return cls(
            base_url=options["LLM_BASE_URL"], model=options["LLM_MODEL"], api_key=options["LLM_API_KEY"],
            timeout_seconds=options["LLM_TIMEOUT_SECONDS"], response_format=options["LLM_RESPONSE_FORMAT"],
            max_output_tokens=options["LLM_MAX_OUTPUT_TOKENS"],
        )

    def problems(self) -> list[str]:
        """What is wrong with this configuration, as setting names and why (empty: usable)."""
        found = []
        if not self.base_url.startswith(("http://", "https://")):
            found.append("RELAYOPS_LLM_BASE_URL must be an http(s) URL, e.g. http://127.0.0.1:11434/v1")
        if not self.model:
            found.append("RELAYOPS_LLM_MODEL must name the model")
        if not 0 < self.timeout_seconds <= 3600:
            found.append("RELAYOPS_LLM_TIMEOUT_SECONDS must be in (0, 3600]")
        if self.response_format not in RESPONSE_FORMATS:
            found.append(f"RELAYOPS_LLM_RESPONSE_FORMAT must be one of {', '.join(RESPONSE_FORMATS)}")
        if not 1 <= self.max_output_tokens <= 1_000_000:
            found.append("RELAYOPS_LLM_MAX_OUTPUT_TOKENS must be in [1, 1000000]")
        return found


class _Message(pydantic.BaseModel):
    content: str | None = None
    refusal: str | None = None


class _Choice(pydantic.BaseModel):
    message: _Message
    finish_reason: str | None = None


class _Usage(pydantic.BaseModel):
    prompt_tokens: int | None = pydantic.Field(default=None, ge=0)
    completion_tokens: int | None = pydantic.Field(default=None, ge=0)


class _Completion(pydantic.BaseModel):
    model: str | None = None
    choices: list[_Choice] = pydantic.Field(min_length=1)
    usage: _Usage | None = None


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes


class LLMExtractor:
    """Calls the model once per attempt. ``transport`` is for tests only (httpx's mock transports)."""

    extractor_name = "llm"

    def __init__(
        self, config: LLMConfig, *, clock: Clock = system_clock, transport: httpx.BaseTransport | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.clock = clock
        self.transport = transport
        self.monotonic = monotonic
        self.prompt_hash = prompt_hash(config.response_format)

    @classmethod
    def from_settings(cls) -> LLMExtractor:
        return cls(LLMConfig.from_settings())

    def __call__(self, document: Document, checkpoint: Callable[[], None]) -> Extraction:
        text = document.text
        if text is None or not text.strip():
            raise PermanentError(ErrorCode.DOCUMENT_MALFORMED)
        try:
            return self._extract(text, document, checkpoint)
        except JobFailure as failure:  # no answer to count: the attempt still records the model and prompt
            failure.usage = failure.usage or Usage(model=self.config.model[:200], prompt_hash=self.prompt_hash)
            raise

    def _extract(self, text: str, document: Document, checkpoint: Callable[[], None]) -> Extraction:
        timeout, capped = self._timeout(document)
        started = self.monotonic()
        reply = self._post(self._request(text), timeout, capped)
        checkpoint()
        latency = self.monotonic() - started
        log.info("llm.answered", status=reply.status, seconds=round(latency, 3), model=self.config.model)
        _raise_for_status(reply, self.clock.now())
        completion = _completion(reply.body)
        usage = Usage(
            model=(completion.model or self.config.model)[:200], prompt_hash=self.prompt_hash,
            input_tokens=completion.usage.prompt_tokens if completion.usage else None,
            output_tokens=completion.usage.completion_tokens if completion.usage else None,
        )
        return Extraction(fields=_answer(completion, usage), usage=usage)

    def _timeout(self, document: Document) -> tuple[float, bool]:
        """The request's timeout and whether the deadline (not the setting) chose it."""
        if document.deadline_at is None:
            return self.config.timeout_seconds, False
        left = (document.deadline_at - self.clock.now()).total_seconds()
        if left <= 0:
            raise JobCancelledError(ErrorCode.DEADLINE_EXCEEDED)
        return (left, True) if left < self.config.timeout_seconds else (self.config.timeout_seconds, False)

    def _request(self, text: str) -> dict[str, Any]:
        mode = self.config.response_format
        system = SYSTEM_PROMPT + ("" if mode == "json_schema" else SCHEMA_HINT.format(schema=json.dumps(SCHEMA)))
        body: dict[str, Any] = {
            "model": self.config.model, "temperature": 0, "max_tokens": self.config.max_output_tokens,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": USER_TEMPLATE.format(document=text)}],
        }
        if mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "invoice", "schema": SCHEMA, "strict": False}}
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    def _post(self, body: dict[str, Any], timeout: float, capped: bool) -> _Reply:
        """POST and read the whole answer within ``timeout``; a timeout is the deadline's (cancel) when
        ``capped``, else transient."""
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        end = self.monotonic() + timeout
        try:
            with httpx.Client(transport=self.transport, timeout=timeout) as client:
                with client.stream("POST", url, json=body, headers=headers) as response:
                    chunks, size = [], 0
                    for chunk in response.iter_bytes():
                        size += len(chunk)
                        if self.monotonic() > end:
                            raise httpx.ReadTimeout("answer still arriving at the timeout")
                        if size > MAX_ANSWER_BYTES:
                            raise PermanentError(ErrorCode.LLM_BAD_RESPONSE)
                        chunks.append(chunk)
                    return _Reply(response.status_code, response.headers, b"".join(chunks))
        except httpx.TimeoutException:
            log.warning("llm.timeout", timeout_seconds=round(timeout, 3), deadline=capped)
            raise (JobCancelledError(ErrorCode.DEADLINE_EXCEEDED) if capped
                   else TransientError(ErrorCode.LLM_TIMEOUT)) from None
        except httpx.TransportError as exc:
            log.warning("llm.unreachable", error_type=type(exc).__name__)
            raise TransientError(ErrorCode.LLM_UNAVAILABLE) from None


def retry_after(value: str | None, now: dt.datetime) -> dt.timedelta | None:
    """A ``Retry-After`` header (seconds or an HTTP date) as a delay from ``now``; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return dt.timedelta(seconds=min(int(value), 86_400))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(when - now, dt.timedelta(0))


def _raise_for_status(reply: _Reply, now: dt.datetime) -> None:
    status = reply.status
    if 200 <= status < 300:
        return
    if status == 429 or status >= 500:
        code = ErrorCode.LLM_RATE_LIMITED if status == 429 else ErrorCode.LLM_SERVER_ERROR
        raise TransientError(code, f"HTTP {status}", retry_after=retry_after(reply.headers.get("retry-after"), now))
    if status == 408:
        raise TransientError(ErrorCode.LLM_TIMEOUT, "HTTP 408")
    if status in (401, 403):
        raise PermanentError(ErrorCode.LLM_UNAUTHORIZED, f"HTTP {status}")
    raise PermanentError(ErrorCode.LLM_REQUEST_REJECTED, f"HTTP {status}")


def _completion(body: bytes) -> _Completion:
    try:
        return _Completion.model_validate_json(body)
    except pydantic.ValidationError:
        raise PermanentError(ErrorCode.LLM_BAD_RESPONSE) from None


def _json_text(content: str) -> str:
    """The answer without a Markdown code fence around it (some servers add one without structured output)."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3]
        text = text[4:] if text.lower().startswith("json") else text
    return text.strip()


def _answer(completion: _Completion, usage: Usage) -> dict[str, Any]:
    choice = completion.choices[0]
    if choice.message.refusal or choice.finish_reason == "content_filter":
        raise PermanentError(ErrorCode.LLM_REFUSED, usage=usage)
    if choice.finish_reason == "length":
        raise PermanentError(ErrorCode.LLM_ANSWER_TRUNCATED, usage=usage)
    try:
        answer = json.loads(_json_text(choice.message.content or ""))
    except ValueError:
        raise PermanentError(ErrorCode.LLM_ANSWER_NOT_JSON, usage=usage) from None
    try:
        return InvoiceFields.model_validate(answer).model_dump(mode="json")
    except pydantic.ValidationError:
        raise PermanentError(ErrorCode.LLM_ANSWER_INVALID, usage=usage) from None
