"""Many clients at once: overlapping writes all land, and every answer reflects its own write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.schemas import ContextResponse
from tests.builders import Api

pytestmark = pytest.mark.both_stores

CLIENTS = 24


async def _branch_turn(api: Api, story_id: str, parent: str, i: int) -> dict[str, Any]:
    user = await api.append(story_id, "user", f"第{i}个分支的问题", parent)
    reply = await api.append(story_id, "reply", f"第{i}个分支的回答", user["node"]["id"])
    return await api.call("GET", f"/v1/stories/{story_id}/context?at={reply['node']['id']}")


async def test_overlapping_appends_on_branches_all_land_with_their_context(api: Api, story: dict[str, Any]) -> None:
    sid, root = story["id"], story["root_id"]
    contexts = await asyncio.wait_for(
        asyncio.gather(*(_branch_turn(api, sid, root, i) for i in range(CLIENTS))), timeout=30
    )
    assert [c["messages"][-1]["content"] for c in contexts] == [f"第{i}个分支的回答" for i in range(CLIENTS)]
    tree = await api.call("GET", f"/v1/stories/{sid}/tree")
    assert len(tree["nodes"]) == 1 + 2 * CLIENTS


async def test_context_response_matches_its_published_schema(api: Api, story: dict[str, Any]) -> None:
    await api.turn(story["id"], "你好。", "你好，旅人。")
    await api.append(story["id"], "user", "灯塔还亮着吗？")
    data = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert ContextResponse.model_validate(data).model_dump(mode="json") == data


async def test_concurrent_card_edits_of_different_fields_all_survive(api: Api) -> None:
    card = await api.card()
    fields = ["description", "personality", "scenario", "mes_example", "creator_notes", "system_prompt"]
    await asyncio.gather(*(api.call("PATCH", f"/v1/cards/{card['id']}", {"card": {f: f"新的{f}"}}) for f in fields))
    after = await api.call("GET", f"/v1/cards/{card['id']}")
    assert {f: after["card"][f] for f in fields} == {f: f"新的{f}" for f in fields}
