"""OpenAI-compatible chat and embeddings clients on aiohttp.

Behaviour every caller can rely on:
- Any base URL, key and model (DeepSeek, Qwen, a local server, the fake server in tests).
- Chat always streams (`stream: true`, `stream_options.include_usage`): text deltas reach `on_text`
  as they arrive, tool calls are assembled from their fragments (each fragment also reaches
  `on_call`, which says whether it passed anything on), `usage` is captured when sent.
- Retries with exponential backoff and full jitter on 429, 5xx and network errors, honouring
  `Retry-After`, but only while nothing has been streamed to the caller: once text went out, a
  failure is final (`ModelCallError("interrupted")`), so no delta is ever repeated.
- `read_timeout` bounds the silence between two chunks; `connect_timeout` the connection.
- At most `concurrency` calls are in flight per client; the others wait their turn.
- The API key is sent in the Authorization header only; it is never logged or shown in `repr`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson

from domain.ports import ChatResult, ModelCallError, ToolCall

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass
class ModelEndpoint:
    """Where a model lives and how patiently to talk to it."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    max_retries: int = 3
    backoff: float = 0.5
    backoff_cap: float = 8.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    concurrency: int = 8

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/")


class _Client:
    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.endpoint = endpoint
        self.model = endpoint.model
        self._session: aiohttp.ClientSession | None = None
        self._slots = asyncio.Semaphore(endpoint.concurrency)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.endpoint.url!r}, model={self.model!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        return headers

    def _client_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=self.endpoint.connect_timeout, sock_read=self.endpoint.read_timeout
            )
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _unreached(self, exc: BaseException) -> str:
        """What went wrong when no answer came, in words: could not connect, no answer in time, cut off."""
        if isinstance(exc, TimeoutError):
            return (
                f"no answer within {self.endpoint.read_timeout:g} s (connecting: {self.endpoint.connect_timeout:g} s)"
            )
        if isinstance(exc, aiohttp.ClientConnectorError):
            reason = exc.os_error.strerror or str(exc.os_error) if exc.os_error is not None else str(exc)
            return f"could not connect to {exc.host}:{exc.port}: {reason}"
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return "the server closed the connection before it answered"
        return f"{type(exc).__name__}: {exc}"

    def _scrubbed(self, text: str) -> str:
        """Provider error text as kept in events: without our key, should a gateway echo it."""
        key = self.endpoint.api_key
        return text.replace(key, "***") if key else text

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.endpoint.backoff_cap)
            except ValueError:
                pass
        return random.uniform(0, min(self.endpoint.backoff_cap, self.endpoint.backoff * 2**attempt))

    async def _request(
        self,
        path: str,
        body: Mapping[str, Any],
        consume: Callable[[aiohttp.ClientResponse], Awaitable[T]],
        delivered: Callable[[], bool],
    ) -> T:
        """POST with retries and hand the 200 response to `consume`. `delivered()` tells whether output
        already reached the caller, after which a broken stream is final instead of retried."""
        attempt = 0
        payload = orjson.dumps(body)  # UTF-8 as is: a Chinese prompt stays a third of its escaped size
        async with self._slots:
            while True:
                began = False  # (a 200 came: the upstream was reached, whatever breaks after)
                try:
                    async with self._client_session().post(
                        self.endpoint.url + path, data=payload, headers=self._headers()
                    ) as response:
                        if response.status == 200:
                            began = True
                            return await consume(response)
                        detail = self._scrubbed((await response.text())[:300])
                        if response.status not in RETRY_STATUS or attempt >= self.endpoint.max_retries:
                            raise ModelCallError(f"http {response.status}", detail)
                        delay = self._delay(attempt, response.headers.get("Retry-After"))
                        log.warning("%r answered %s; retry %d in %.2fs", self, response.status, attempt + 1, delay)
                except (TimeoutError, aiohttp.ClientError) as exc:
                    outcome = "timeout" if isinstance(exc, asyncio.TimeoutError) else "network"
                    if delivered():
                        raise ModelCallError("interrupted", f"the stream broke after output began: {exc!r}") from exc
                    if attempt >= self.endpoint.max_retries and began and outcome == "network":
                        detail = f"the answer broke off before it said anything: {exc!r}"
                        raise ModelCallError("interrupted", detail) from exc
                    if attempt >= self.endpoint.max_retries:
                        raise ModelCallError(outcome, self._unreached(exc)) from exc
                    delay = self._delay(attempt, None)
                    log.warning("%r failed (%s); retry %d in %.2fs", self, outcome, attempt + 1, delay)
                attempt += 1
                await asyncio.sleep(delay)


class OpenAIChat(_Client):
    """An OpenAI-compatible `/chat/completions` client (implements `domain.ports.ChatModel`)."""

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
        max_tokens: int | None = None,
        on_call: Callable[[int, str, str], bool] | None = None,
    ) -> ChatResult:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = list(tools)
        if max_tokens:
            body["max_tokens"] = max_tokens
        attempts: list[_Stream] = []

        async def consume(response: aiohttp.ClientResponse) -> _Stream:
            stream = _Stream(on_text, on_call)  # a fresh one per attempt: fragments of a broken try are dropped
            attempts.append(stream)
            await stream.read(response)
            return stream

        stream = await self._request("/chat/completions", body, consume, lambda: any(a.delivered for a in attempts))
        return stream.result(self.model)


class _Stream:
    """Assembles one streamed chat completion from its SSE chunks."""

    def __init__(
        self, on_text: Callable[[str], None] | None, on_call: Callable[[int, str, str], bool] | None = None
    ) -> None:
        self.on_text, self.on_call = on_text, on_call
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.usage: dict[str, int] = {}
        self.finish: str | None = None
        self.model: str | None = None
        self.delivered = False

    async def read(self, response: aiohttp.ClientResponse) -> None:
        async for raw in response.content:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                self.take(json.loads(data))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise ModelCallError("malformed", f"unreadable stream chunk: {data[:200]}") from exc
        if not self.delivered and not self.calls and self.finish is None:
            raise ModelCallError("malformed", "the stream ended before any choice arrived")

    def take(self, chunk: Mapping[str, Any]) -> None:
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
                self.delivered = True
                if self.on_text is not None:
                    self.on_text(delta["content"])
            for fragment in delta.get("tool_calls") or ():
                index = int(fragment.get("index", 0))
                call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                function = fragment.get("function") or {}
                call["id"] = fragment.get("id") or call["id"]
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
                passed = self.on_call is not None and function.get("arguments")
                if passed and self.on_call is not None and self.on_call(index, call["name"], function["arguments"]):
                    self.delivered = True  # (what reached the caller is never streamed twice: no retry)
            self.finish = choice.get("finish_reason") or self.finish

    def result(self, model: str) -> ChatResult:
        calls = tuple(
            ToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"]) for i, c in sorted(self.calls.items())
        )
        return ChatResult(
            text="".join(self.text),
            tool_calls=calls,
            model=self.model or model,
            prompt_tokens=self.usage.get("prompt_tokens"),
            completion_tokens=self.usage.get("completion_tokens"),
            finish_reason=self.finish,
        )


class OpenAIEmbeddings(_Client):
    """An OpenAI-compatible `/embeddings` client (recall uses it through `providers.embedders.EndpointEmbedder`)."""

    async def embed(self, texts: Sequence[str], dimensions: int | None = None) -> list[list[float]]:
        """One vector per text, in order (`dimensions`: asked of models that can shorten theirs)."""
        if not texts:
            return []

        async def consume(response: aiohttp.ClientResponse) -> list[list[float]]:
            try:
                data = await response.json(content_type=None)
                rows = sorted(data["data"], key=lambda row: row.get("index", 0))
                return [list(map(float, row["embedding"])) for row in rows]
            except (ValueError, TypeError, KeyError) as exc:
                raise ModelCallError("malformed", "unreadable embeddings response") from exc

        body: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if dimensions:
            body["dimensions"] = dimensions
        return await self._request("/embeddings", body, consume, lambda: False)
