"""An OpenAI-compatible model server on loopback, scripted step by step, for tests, benchmarks and demos.

Each `/chat/completions` request takes the next scripted `Step` (or asks `fallback` when the script
is empty) and plays it: streamed text, tool calls, an HTTP error, a slow answer, a dropped
connection, a malformed chunk. Every request body is kept in `requests`, so tests can check what the
engine sent; a request that does not ask to `stream` gets one JSON answer, and `/models` lists
`fake-model`. `/embeddings` answers with deterministic hashed vectors (of `dimensions` when asked),
keeps each request in `embedding_requests`, and answers `embeddings_status` instead when it is set.

    async with FakeModelServer() as fake:
        fake.script(Text("你好。"), ToolCalls(("draft_seal", {"version": 1})))
        model = OpenAIChat(ModelEndpoint(fake.url, "fake-model"))
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True, kw_only=True)
class Step:
    """One scripted answer. `delay` waits before the response starts; `chunk_delay` between chunks."""

    delay: float = 0.0
    chunk_delay: float = 0.0


@dataclass(frozen=True)
class Text(Step):
    """Plain streamed text (several chunks when given a list)."""

    text: str | list[str] = ""
    prompt_tokens: int = 100
    completion_tokens: int | None = None


@dataclass(frozen=True)
class ToolCalls(Step):
    """Tool calls, each (name, arguments as a dict or as raw text), optionally after some text."""

    calls: tuple[tuple[str, Any], ...] = ()
    text: str = ""

    def __init__(self, *calls: tuple[str, Any], text: str = "", delay: float = 0.0, chunk_delay: float = 0.0) -> None:
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "delay", delay)
        object.__setattr__(self, "chunk_delay", chunk_delay)


@dataclass(frozen=True)
class Status(Step):
    """An HTTP error answer (429, 500, …) with an optional Retry-After."""

    status: int = 500
    retry_after: float | None = None


@dataclass(frozen=True)
class Drop(Step):
    """Stream the role and then `text` in chunks, then cut the connection without finishing (with no
    text: an upstream that fails after its first chunk, which says nothing)."""

    text: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Malformed(Step):
    """A data line that is not JSON."""


Fallback = Callable[[Mapping[str, Any]], Step]


class FakeModelServer:
    def __init__(self, fallback: Fallback | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.steps: deque[Step] = deque()
        self.fallback = fallback or (lambda body: Text("（模型没有更多脚本。）"))
        self.requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.embeddings_status: int | None = None  # an HTTP error every /embeddings call answers
        self.embeddings_delay = 0.0  # seconds every /embeddings call waits before it answers (a slow embedder)
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None

    def script(self, *steps: Step) -> None:
        self.steps.extend(steps)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def __aenter__(self) -> FakeModelServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        step = self.steps.popleft() if self.steps else self.fallback(body)
        if step.delay:
            await asyncio.sleep(step.delay)
        if isinstance(step, Status):
            headers = {"Retry-After": str(step.retry_after)} if step.retry_after is not None else {}
            return web.json_response(
                {"error": {"message": f"scripted {step.status}"}}, status=step.status, headers=headers
            )
        model = body.get("model", "fake-model")
        if not body.get("stream"):  # (OpenAI's default) one JSON answer
            return web.json_response(_answer(step, model))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i, chunk in enumerate(_chunks(step, model)):
            if chunk is None:  # Drop: cut the connection mid-stream
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(chunk)
            if step.chunk_delay and i:  # (the role goes with the first words, as real servers send it)
                await asyncio.sleep(step.chunk_delay)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}]}
        )

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.embedding_requests.append(body)
        if self.embeddings_delay:
            await asyncio.sleep(self.embeddings_delay)
        if self.embeddings_status is not None:
            return web.json_response({"error": {"message": "scripted failure"}}, status=self.embeddings_status)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        size = int(body.get("dimensions") or 64)
        data = [{"index": i, "embedding": hashed_vector(t, size)} for i, t in enumerate(texts)]
        return web.json_response({"data": data, "model": body.get("model", "fake-embed")})


def _event(payload: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


def _delta(model: str, delta: Mapping[str, Any], finish: str | None = None) -> bytes:
    return _event({"model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _chunks(step: Step, model: str) -> list[bytes | None]:
    if isinstance(step, Malformed):
        return [_delta(model, {"content": "半句"}), b"data: {not json\n\n"]
    role = _delta(model, {"role": "assistant", "content": ""})  # (OpenAI's stream opens with the role alone)
    if isinstance(step, Drop):
        return [role, *(_delta(model, {"content": t}) for t in step.text), None]
    out: list[bytes | None] = [role]
    text = step.text if isinstance(step, Text | ToolCalls) else ""
    pieces = text if isinstance(text, list) else [text] if text else []
    out.extend(_delta(model, {"content": p}) for p in pieces)
    finish = "stop"
    if isinstance(step, ToolCalls):
        finish = "tool_calls"
        for i, (name, args) in enumerate(step.calls):
            raw = _arguments(args)
            half = len(raw) // 2  # arguments arrive in two fragments, as real servers send them
            head = {
                "index": i,
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": raw[:half]},
            }
            out.append(_delta(model, {"tool_calls": [head]}))
            out.append(_delta(model, {"tool_calls": [{"index": i, "function": {"arguments": raw[half:]}}]}))
    out.append(_delta(model, {}, finish))
    completion = getattr(step, "completion_tokens", None) or max(1, len("".join(pieces)) // 2)
    usage = {"prompt_tokens": getattr(step, "prompt_tokens", 100), "completion_tokens": completion}
    out.append(_event({"model": model, "choices": [], "usage": {**usage, "total_tokens": sum(usage.values())}}))
    return out


def _answer(step: Step, model: str) -> dict[str, Any]:
    text = step.text if isinstance(step, Text | ToolCalls) else ""
    content = "".join(text) if isinstance(text, list) else text
    completion = getattr(step, "completion_tokens", None) or max(1, len(content) // 2)
    usage = {"prompt_tokens": getattr(step, "prompt_tokens", 100), "completion_tokens": completion}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    finish = "stop"
    if isinstance(step, ToolCalls):
        finish = "tool_calls"
        message["content"] = content or None
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": _arguments(args)}}
            for i, (name, args) in enumerate(step.calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {**usage, "total_tokens": sum(usage.values())},
    }


def _arguments(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def hashed_vector(text: str, dimensions: int = 64) -> list[float]:
    """A deterministic unit vector from the text's character bigrams (not semantic; stable for tests)."""
    vector = [0.0] * dimensions
    for i in range(max(len(text) - 1, 1)):
        digest = hashlib.blake2b(text[i : i + 2].encode(), digest_size=4).digest()
        vector[int.from_bytes(digest[:2], "little") % dimensions] += 1.0 if digest[2] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def echo_writer(body: Mapping[str, Any]) -> Step:
    """A stand-in main model for trying engine mode offline: it writes a short reply through the draft
    tools (draft_write, then draft_seal) and answers plainly when no tools are offered."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return ToolCalls(("draft_seal", {"version": 1}))
    words = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    said = words.strip().split("\n\n")[-1]  # the user's own words come last, after any data blocks
    reply = f"（离线模型）我听见你说：「{said[:60]}」。"
    if not body.get("tools"):
        return Text(reply)
    return ToolCalls(("draft_write", {"version": 0, "content": reply}))
