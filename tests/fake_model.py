"""Helpers for tests that talk to `providers.fake_server.FakeModelServer`: endpoints, tool-call steps,
engine turns over HTTP and server-sent-event parsing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import ClientResponse

from api.settings import ModelSettings
from providers.fake_server import FakeModelServer, ToolCalls
from providers.openai import ModelEndpoint
from tests.builders import Api

MAIN_MODEL = "fake-main"
MakeEngine = Callable[..., Awaitable[Api]]
SSE = {"Accept": "text/event-stream"}


def endpoint(fake: FakeModelServer, **overrides: Any) -> ModelEndpoint:
    """A fast-retrying endpoint on the fake server (backoff in milliseconds, not seconds)."""
    values: dict[str, Any] = {"max_retries": 2, "backoff": 0.001, "backoff_cap": 0.01, "read_timeout": 5.0}
    return ModelEndpoint(fake.url, MAIN_MODEL, **{**values, **overrides})


def main_model(fake: FakeModelServer, max_retries: int = 2, read_timeout: float = 5.0) -> ModelSettings:
    return ModelSettings(base_url=fake.url, model=MAIN_MODEL, max_retries=max_retries, read_timeout=read_timeout)


def calls(*named: tuple[str, Any], text: str = "") -> ToolCalls:
    """One round of tool calls."""
    return ToolCalls(*named, text=text)


def write(version: int, content: str) -> tuple[str, dict[str, Any]]:
    return ("draft_write", {"version": version, "content": content})


def append(version: int, content: str) -> tuple[str, dict[str, Any]]:
    return ("draft_append", {"version": version, "content": content})


def edit(version: int, *pairs: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    return ("draft_edit", {"version": version, "edits": [{"old": o, "new": n} for o, n in pairs]})


def seal(version: int) -> tuple[str, dict[str, Any]]:
    return ("draft_seal", {"version": version})


def ask(question: str, *options: str) -> tuple[str, dict[str, Any]]:
    return ("ask", {"question": question, "options": list(options)})


def messages_of(request: Mapping[str, Any], role: str) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == role]


# --- engine turns over HTTP ----------------------------------------------------------------------


async def post_turn(api: Api, story_id: str, text: str = "灯塔怎么了？", status: int = 201) -> dict[str, Any]:
    data: dict[str, Any] = await api.call("POST", f"/v1/stories/{story_id}/turns", {"text": text}, status)
    return data


async def draft(api: Api, node_id: str) -> dict[str, Any]:
    data: dict[str, Any] = await api.call("GET", f"/v1/nodes/{node_id}/draft")
    return data


async def node(api: Api, node_id: str) -> dict[str, Any]:
    data: dict[str, Any] = await api.call("GET", f"/v1/nodes/{node_id}")
    return data


async def costs(api: Api, path: str) -> dict[str, Any]:
    data: dict[str, Any] = await api.call("GET", f"{path}/costs")
    return data


async def wait_until(check: Callable[[], Awaitable[bool]], attempts: int = 200, pause: float = 0.02) -> None:
    """Poll `check` until it holds (at most attempts × pause seconds), or fail."""
    for _ in range(attempts):
        if await check():
            return
        await asyncio.sleep(pause)
    raise AssertionError("the condition never held")


# --- server-sent events ----------------------------------------------------------------------------


class EventStream:
    """Reads `event:`/`data:` pairs off an SSE response, checking the framing line by line."""

    def __init__(self, response: ClientResponse) -> None:
        self.response = response
        self.lines: list[str] = []

    async def _line(self) -> str | None:
        raw = await self.response.content.readline()
        if not raw:
            return None
        line = raw.decode("utf-8")
        self.lines.append(line)
        return line

    async def next(self) -> tuple[str, dict[str, Any]] | None:
        """The next event (kind, data), skipping comments; None at the end of the stream."""
        while (line := await self._line()) is not None:
            if line == "\n" or line.startswith(":"):
                continue
            assert line.startswith("event: ") and line.endswith("\n"), f"expected an event line, got {line!r}"
            data = await self._line()
            assert data is not None and data.startswith("data: "), f"event without a data line: {data!r}"
            blank = await self._line()
            assert blank == "\n", f"event not closed by a blank line: {blank!r}"
            return line[len("event: ") : -1], json.loads(data[len("data: ") :])
        return None

    async def until(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """Events up to and including the first of `kind`."""
        seen = []
        while (event := await self.next()) is not None:
            seen.append(event)
            if event[0] == kind:
                return seen
        raise AssertionError(f"the stream ended without a {kind!r} event: {[k for k, _ in seen]}")

    async def all(self) -> list[tuple[str, dict[str, Any]]]:
        seen = []
        while (event := await self.next()) is not None:
            seen.append(event)
        return seen
