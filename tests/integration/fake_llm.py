"""A fake OpenAI-compatible chat-completions server on loopback (pytest-httpserver), scripted per test.

Nothing here calls the internet: the LLM extractor under test is pointed at this server's URL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from pipeline.extraction.llm import LLMConfig, LLMExtractor

PATH = "/v1/chat/completions"
MODEL = "tiny-invoice-1"
API_KEY = "sk-test-not-a-real-key"


def completion(content: str | None = None, *, refusal: str | None = None, finish: str = "stop",
               tokens: tuple[int, int] = (812, 240)) -> dict[str, Any]:
    """A chat completion as OpenAI, vLLM, Ollama and llama.cpp's server answer it."""
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "model": MODEL,
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1], "total_tokens": sum(tokens)},
    }


class FakeLLM:
    """The server, with a gate that holds slow or hanging answers until released (at teardown at the latest)."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.gate = threading.Event()
        self.requests: list[dict[str, Any]] = []

    def url(self) -> str:
        return self.server.url_for("/v1")

    def extractor(self, **config: Any) -> LLMExtractor:
        settings = {"base_url": self.url(), "model": MODEL, "api_key": API_KEY, "timeout_seconds": 5.0, **config}
        clock = settings.pop("clock", None)
        return LLMExtractor(LLMConfig(**settings), **({"clock": clock} if clock else {}))

    def _record(self, request: Request) -> None:
        self.requests.append({"json": json.loads(request.data), "authorization": request.headers.get("Authorization")})

    def answer(self, body: Any, status: int = 200, headers: dict[str, str] | None = None, *, delay: float = 0.0,
               raw: bytes | None = None) -> None:
        """Every request gets this answer (after ``delay`` seconds, unless the gate opens first)."""
        def handler(request: Request) -> Response:
            self._record(request)
            if delay:
                self.gate.wait(delay)
            data = raw if raw is not None else json.dumps(body)
            return Response(data, status=status, headers=headers or {}, content_type="application/json")
        self.server.expect_request(PATH, method="POST").respond_with_handler(handler)

    def hang(self) -> None:
        """Accept the request and answer nothing until the gate opens."""
        self.answer(completion("{}"), delay=30.0)


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    server = HTTPServer(host="127.0.0.1", threaded=True)
    server.start()
    fake = FakeLLM(server)
    try:
        yield fake
    finally:
        fake.gate.set()
        server.clear()
        server.stop()
