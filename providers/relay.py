"""A front end's chat-completions request relayed to the upstream model as it came (its fields untouched
but `messages`), streamed chunks passed on as they arrive, and what the first choice said kept for the
record. Retries (429, 5xx, network) only while nothing reached the front end, as `providers/openai.py`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from domain.ports import ModelCallError
from providers.openai import _Client

Send = Callable[[bytes, str], Awaitable[None]]  # a chunk line as it came, and the first choice's text in it


class ClientGone(Exception):
    """The front end went away while its answer streamed (not the upstream's failure: nothing to retry)."""


@dataclass
class Relayed:
    """What the upstream answered: the first choice's text, the usage, the model, and (not streamed) the
    answer's body to hand back as it is."""

    text: str = ""
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    body: bytes = b""
    chunks: int = 0
    parts: list[str] = field(default_factory=list)
    tool_calls: list[str] = field(default_factory=list)  # the names of the front end's tools it called


class Relay(_Client):
    async def complete(self, body: Mapping[str, Any], send: Send | None) -> Relayed:
        """The request relayed. Streamed (`send` given, and the body asks `stream`): each chunk line goes to
        `send` as it comes, but `data: [DONE]`, which the caller sends once it has recorded the reply; the
        usage chunk is asked for, and passed on only when the front end asked for it too."""
        streaming = bool(body.get("stream")) and send is not None
        wanted = dict(body)
        asked_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if streaming and not asked_usage:
            wanted["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        relayed = Relayed()
        # chunks that say nothing yet (a role alone), held until one does: an upstream that fails after them
        # has answered nothing (retried, or no turn), and the front end sees them with the first words
        held: list[tuple[bytes, str]] = []

        async def consume(response: aiohttp.ClientResponse) -> Relayed:
            if not streaming:
                relayed.body = await response.read()
                answer = orjson.loads(relayed.body)
                if not isinstance(answer, dict):
                    raise ModelCallError("malformed", "the upstream's answer is not a JSON object")
                _take_answer(relayed, answer)
                return relayed
            assert send is not None
            held.clear()  # (what a failed attempt held is not this one's)
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                chunk = orjson.loads(data)
                if not isinstance(chunk, dict):
                    raise ModelCallError("malformed", f"a stream chunk that is not a JSON object: {data[:200]!r}")
                if chunk.get("error"):
                    raise ModelCallError("upstream error", str(chunk["error"])[:300])
                before = len(relayed.parts)
                _take_chunk(relayed, chunk)
                if asked_usage or chunk.get("choices"):
                    held.append((b"data: " + data + b"\n\n", "".join(relayed.parts[before:])))
                    if relayed.chunks or _says_something(chunk):
                        await flush()
            await flush()  # (an answer that said nothing at all: it is the answer)
            relayed.text = "".join(relayed.parts)
            return relayed

        async def flush() -> None:
            assert send is not None
            while held:
                line, text = held.pop(0)
                relayed.chunks += 1
                try:
                    await send(line, text)
                except (ConnectionResetError, aiohttp.ClientConnectionResetError) as gone:
                    raise ClientGone(str(gone)) from gone

        try:
            return await self._request("/chat/completions", wanted, consume, lambda: relayed.chunks > 0)
        except orjson.JSONDecodeError as bad:
            raise ModelCallError("malformed", f"the upstream answered what is not JSON: {bad}") from bad

    async def models(self) -> bytes:
        """The upstream's model list, as it answers it; ModelCallError when it cannot be reached or does not
        answer 200 (no retries: a front end asks again)."""
        try:
            async with self._client_session().get(self.endpoint.url + "/models", headers=self._headers()) as response:
                if response.status != 200:
                    raise ModelCallError(f"http {response.status}", self._scrubbed((await response.text())[:300]))
                return await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ModelCallError(
                "timeout" if isinstance(exc, TimeoutError) else "network", self._unreached(exc)
            ) from exc


def _take_chunk(relayed: Relayed, chunk: Mapping[str, Any]) -> None:
    relayed.model = chunk.get("model") or relayed.model
    usage: Mapping[str, Any] = chunk["usage"] if isinstance(chunk.get("usage"), dict) else {}
    relayed.prompt_tokens = usage.get("prompt_tokens", relayed.prompt_tokens)
    relayed.completion_tokens = usage.get("completion_tokens", relayed.completion_tokens)
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta: Mapping[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
        content = delta.get("content")
        if isinstance(content, str) and content:
            relayed.parts.append(content)
        _take_calls(relayed, delta.get("tool_calls"))
        relayed.finish_reason = choice.get("finish_reason") or relayed.finish_reason


def _says_something(chunk: Mapping[str, Any]) -> bool:
    """Whether a stream chunk carries anything but a role and empty words: words, a tool call, reasoning, an
    end, the usage (a reasoning model's thinking goes on to the front end as it comes)."""
    if isinstance(chunk.get("usage"), dict):
        return True
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        delta: Mapping[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
        if choice.get("finish_reason") or any(value for name, value in delta.items() if name != "role"):
            return True
    return False


def _take_answer(relayed: Relayed, answer: Mapping[str, Any]) -> None:
    relayed.model = answer.get("model")
    usage: Mapping[str, Any] = answer["usage"] if isinstance(answer.get("usage"), dict) else {}
    relayed.prompt_tokens, relayed.completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    choices = answer.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            message: Mapping[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
            relayed.text = str(message.get("content") or "")
            relayed.finish_reason = choice.get("finish_reason")
            _take_calls(relayed, message.get("tool_calls"))


def _take_calls(relayed: Relayed, calls: Any) -> None:
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]:
            relayed.tool_calls.append(function["name"])  # (a streamed call names itself in its first part)
