"""Regenerate is a sibling reply, checkout is a leaf move, and racing writers get one 201 and one 409."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.builders import Api

pytestmark = pytest.mark.both_stores


async def last_message(api: Api, story_id: str) -> str:
    context = await api.call("GET", f"/v1/stories/{story_id}/context")
    content: str = context["messages"][-1]["content"]
    return content


async def regenerate(api: Api, story_id: str) -> tuple[str, str, dict[str, Any]]:
    user, first = await api.turn(story_id, "灯塔的灯为什么灭了？", "风太大了。")
    again = await api.append(story_id, "reply", "油烧完了。", parent_id=user)
    return user, first, again


async def test_reply_under_an_answered_user_node_is_a_regenerate(api: Api, story: dict[str, Any]) -> None:
    _, first, again = await regenerate(api, story["id"])
    siblings = await api.call("GET", f"/v1/nodes/{first}/siblings")
    assert again["regenerated"] is True
    assert [n["id"] for n in siblings["nodes"]] == [first, again["node"]["id"]]


async def test_first_reply_is_not_a_regenerate(api: Api, story: dict[str, Any]) -> None:
    await api.append(story["id"], "user", "你好。")
    assert (await api.append(story["id"], "reply", "嗯。"))["regenerated"] is False


async def test_regenerate_moves_the_leaf_and_the_context_to_the_new_reply(api: Api, story: dict[str, Any]) -> None:
    _, _, again = await regenerate(api, story["id"])
    current = await api.call("GET", f"/v1/stories/{story['id']}")
    assert current["leaf_id"] == again["node"]["id"]
    assert await last_message(api, story["id"]) == "油烧完了。"


async def test_checkout_back_switches_the_context(api: Api, story: dict[str, Any]) -> None:
    _, first, _ = await regenerate(api, story["id"])
    moved = await api.call("POST", f"/v1/stories/{story['id']}/checkout", {"node_id": first})
    assert moved["leaf_id"] == first
    assert await last_message(api, story["id"]) == "风太大了。"


async def test_context_at_a_node_is_the_same_from_any_leaf(api: Api, story: dict[str, Any]) -> None:
    _, first, _ = await regenerate(api, story["id"])
    at = await api.call("GET", f"/v1/stories/{story['id']}/context?at={first}")
    await api.call("POST", f"/v1/stories/{story['id']}/checkout", {"node_id": first})
    assert await api.call("GET", f"/v1/stories/{story['id']}/context") == at


async def append_if_match(api: Api, story: dict[str, Any], text: str) -> int:
    headers = {**api.headers, "If-Match": f'"{story["version"]}"'}
    body = {"kind": "user", "text": text}
    async with api.client.post(f"/v1/stories/{story['id']}/nodes", json=body, headers=headers) as r:
        return r.status


async def test_concurrent_appends_at_one_version_get_one_201_and_one_409(api: Api, story: dict[str, Any]) -> None:
    statuses = await asyncio.gather(append_if_match(api, story, "甲"), append_if_match(api, story, "乙"))
    tree = await api.call("GET", f"/v1/stories/{story['id']}/tree")
    assert sorted(statuses) == [201, 409]
    assert len(tree["nodes"]) == 2


async def test_concurrent_regenerates_both_land_as_siblings(api: Api, story: dict[str, Any]) -> None:
    user, first = await api.turn(story["id"], "问。", "答一。")
    await asyncio.gather(*(api.append(story["id"], "reply", f"答{i}。", parent_id=user) for i in "二三四"))
    siblings = await api.call("GET", f"/v1/nodes/{first}/siblings")
    assert len(siblings["nodes"]) == 4
