"""A front end that keeps its own chat and sends all of it each time, through the official `openai` client."""

from __future__ import annotations

from typing import Any

import openai

from providers.fake_server import FakeModelServer, Text
from tests.builders import Api

SYSTEM = "You are Mira, a ferry pilot on a foggy coast. Stay in character."
GREETING = "The ferry horn sounds. 'Last crossing tonight,' Mira says."


def client_for(api: Api, key: str | None = None) -> openai.AsyncOpenAI:
    base = str(api.client.make_url("/v1"))
    return openai.AsyncOpenAI(base_url=base, api_key=key or api.headers["Authorization"].removeprefix("Bearer "))


class Front:
    """A front end that keeps its own history and sends all of it every time."""

    def __init__(self, api: Api) -> None:
        self.api, self.client = api, client_for(api)
        self.chat: list[dict[str, str]] = []

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM}, {"role": "assistant", "content": GREETING}, *self.chat]

    async def send(self, words: str | None = None, stream: bool = False, **more: Any) -> tuple[str, dict[str, str]]:
        if words is not None:
            self.chat.append({"role": "user", "content": words})
        text, headers = await self.complete(self.messages(), stream, **more)
        self.chat.append({"role": "assistant", "content": text})
        return text, headers

    async def stop(self) -> None:
        """Closes the client and the service it talks to (a restart's first half)."""
        await self.client.close()
        await self.api.client.close()

    async def play(self, fake: FakeModelServer, *words: str) -> str:
        """A turn for each of `words`, answered r1, r2…; the story's id."""
        fake.script(*[Text(f"r{i}") for i in range(1, len(words) + 1)])
        for said in words:
            _, headers = await self.send(said)
        return headers["x-changji-story"]

    async def complete(self, messages: list[dict[str, str]], stream: bool, **more: Any) -> tuple[str, dict[str, str]]:
        if stream:
            async with self.client.chat.completions.with_streaming_response.create(
                model="fake-model",
                messages=messages,
                stream=True,
                **more,  # type: ignore[arg-type]
            ) as response:
                chunks = await response.parse()
                parts = [chunk.choices[0].delta.content or "" async for chunk in chunks if chunk.choices]
                return "".join(parts), dict(response.headers)
        raw = await self.client.chat.completions.with_raw_response.create(
            model="fake-model",
            messages=messages,
            **more,  # type: ignore[arg-type]
        )
        return raw.parse().choices[0].message.content or "", dict(raw.headers)


async def path_texts(api: Api, story_id: str) -> list[tuple[str, str]]:
    path = await api.call("GET", f"/v1/stories/{story_id}/path?limit=10000")
    return [(n["kind"], n["text"]) for n in path["nodes"]]


def front_chat(turns: int) -> list[dict[str, str]]:
    """The chat `Front` keeps after `turns` turns of u1/r1, u2/r2…"""
    chat = []
    for i in range(1, turns + 1):
        chat += [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"r{i}"}]
    return chat
