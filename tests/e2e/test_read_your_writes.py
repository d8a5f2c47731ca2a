"""Invariant 6: once a write is answered, every read reflects it — no waiting, no retries."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from aiohttp.test_utils import TestClient

from api.bootstrap import Service
from api.keys import SERVICE
from service.read_side import INDEX_DELAY
from tests.builders import Api

pytestmark = pytest.mark.both_stores


async def test_tree_search_and_children_show_each_node_when_its_append_returns(api: Api, story: dict[str, Any]) -> None:
    sid = story["id"]
    for i in range(15):
        user = (await api.append(sid, "user", f"第{i}次 marker{i} 今天天气很好"))["node"]["id"]
        tree = await api.call("GET", f"/v1/stories/{sid}/tree")
        assert user in [n["id"] for n in tree["nodes"]]
        hits = await api.call("GET", f"/v1/stories/{sid}/search?q=marker{i}")
        assert [h["node_id"] for h in hits["hits"]] == [user]
        reply = (await api.append(sid, "reply", f"回答{i}"))["node"]["id"]
        children = await api.call("GET", f"/v1/nodes/{user}/children")
        assert [n["id"] for n in children["nodes"]] == [reply]


async def test_lists_show_a_card_and_story_when_their_creation_returns(api: Api) -> None:
    for _ in range(5):
        story = await api.story()
        cards = await api.call("GET", "/v1/cards")
        stories = await api.call("GET", "/v1/stories")
        assert story["card_id"] in [c["id"] for c in cards["items"]]
        assert story["id"] in [s["id"] for s in stories["items"]]


async def test_story_list_shows_the_new_leaf_when_a_checkout_returns(api: Api, story: dict[str, Any]) -> None:
    sid = story["id"]
    _, _reply = await api.turn(sid, "问。", "答。")
    await api.call("POST", f"/v1/stories/{sid}/checkout", {"node_id": story["root_id"]})
    (listed,) = (await api.call("GET", "/v1/stories"))["items"]
    assert (listed["leaf_id"], listed["nodes"]) == (story["root_id"], 3)


async def test_saves_show_a_hidden_node_and_save_when_their_writes_return(api: Api, story: dict[str, Any]) -> None:
    sid = story["id"]
    user, _ = await api.turn(sid, "问。", "答。")
    await api.call("POST", f"/v1/nodes/{user}/hide")
    save = await api.call("POST", f"/v1/stories/{sid}/saves", {"name": "风暴夜"}, 201)
    saves = await api.call("GET", f"/v1/stories/{sid}/saves")
    tree = await api.call("GET", f"/v1/stories/{sid}/tree")
    assert saves["current_save_id"] == save["id"]
    assert [n["hidden"] for n in tree["nodes"] if n["id"] == user] == [True]


async def test_the_full_text_index_catches_up_in_the_background_without_a_search(
    client: TestClient[Any, Any], api: Api, story: dict[str, Any]
) -> None:
    """Writes fold their texts without indexing them (that stays off the turn's path); the index
    follows INDEX_DELAY later, in one transaction for the whole burst."""
    svc: Service = client.app[SERVICE]
    for i in range(5):
        await api.turn(story["id"], f"第{i}问：信鸽", f"第{i}答")
    waiting = await svc.executor.query(svc.store.texts_to_index)
    assert waiting == 11  # the greeting and five turns
    deadline = asyncio.get_running_loop().time() + INDEX_DELAY + 5
    while await svc.executor.query(svc.store.texts_to_index) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    assert await svc.executor.query(svc.store.texts_to_index) == 0
    hits = await svc.executor.query(svc.store.search, UUID(story["id"]), "信鸽")  # straight from the index, no catch-up
    assert len(hits) == 5
