"""Helpers for scene and job tests: a scribe on the fake model server, and waiting for job outcomes."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from api.settings import ModelSettings
from providers.fake_server import FakeModelServer, Step, Text
from tests.builders import Api

SIDE_MODEL = "fake-side"
SETTLED = ("done", "skipped", "failed")
FAST_JOBS: dict[str, Any] = {"job_sweep_seconds": 0.05, "job_retry_seconds": 0.01}


def side_model(fake: FakeModelServer, read_timeout: float = 5.0) -> ModelSettings:
    """The side model on `fake`, without client retries: every failure reaches the job system."""
    return ModelSettings(base_url=fake.url, model=SIDE_MODEL, max_retries=0, read_timeout=read_timeout)


def answer(patch: Mapping[str, Any], prose: bool = True) -> Text:
    """A scribe answer the way models write them: prose around a fenced JSON object."""
    body = json.dumps({"patch": patch}, ensure_ascii=False)
    return Text(f"好的，本轮账本更新如下：\n```json\n{body}\n```\n以上。" if prose else body)


def turn_of(request: Mapping[str, Any]) -> str:
    """The 【本轮对话】 part of a scribe request."""
    content: str = request["messages"][-1]["content"]
    return content.split("【本轮对话】", 1)[1]


def ledger_of(request: Mapping[str, Any]) -> dict[str, Any]:
    content: str = request["messages"][-1]["content"]
    return json.loads(content.split("【当前账本】", 1)[1].split("【本轮对话】", 1)[0])  # type: ignore[no-any-return]


def by_marker(patches: Mapping[str, Mapping[str, Any]], default: Step | None = None) -> Callable[[Any], Step]:
    """A scribe fallback answering the patch whose marker appears in the turn's reply."""

    def fallback(body: Mapping[str, Any]) -> Step:
        turn = turn_of(body)
        for marker, patch in patches.items():
            if re.search(re.escape(marker), turn):
                return answer(patch)
        return default or answer({})

    return fallback


async def jobs(api: Api, story_id: str, **filters: str) -> list[dict[str, Any]]:
    query = "&".join(f"{k}={v}" for k, v in {"story_id": story_id, "limit": "500", **filters}.items())
    data = await api.call("GET", f"/v1/jobs?{query}")
    return data["items"]  # type: ignore[no-any-return]


async def settled(api: Api, story_id: str, node_ids: list[str] | None = None, timeout: float = 20.0) -> dict[str, Any]:
    """Wait until the scribe jobs of these replies (default: every job of the story) are settled."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = {j["node_id"]: j for j in await jobs(api, story_id)}
        wanted = node_ids if node_ids is not None else list(rows)
        if all(n in rows and rows[n]["status"] in SETTLED for n in wanted):
            return rows
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"jobs not settled in {timeout}s: {[rows.get(n) for n in wanted]}")
        await asyncio.sleep(0.02)


async def scene(api: Api, story_id: str, at: str | None = None) -> dict[str, Any]:
    return await api.call("GET", f"/v1/stories/{story_id}/scene" + (f"?at={at}" if at else ""))  # type: ignore[no-any-return]
