"""A card's memory through the HTTP API, offline: a sync recaps the card's stories and merges them, the
memory is read back with each item's sources, a deleted story is forgotten by the next sync, and another
tenant's card is not found."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Api

pytestmark = pytest.mark.both_stores


async def played(api: Api, card_id: str, *turns: tuple[str, str]) -> dict[str, Any]:
    story = await api.story(card_id)
    for user, reply in turns:
        await api.turn(story["id"], user, reply)
    return story


async def test_a_sync_recaps_and_merges_the_cards_stories_and_forgets_a_deleted_one(api: Api, other: Api) -> None:
    card = await api.card()
    empty = await api.call("GET", f"/v1/cards/{card['id']}/memory")
    assert empty["version"] == 0 and empty["recaps"] == [] and empty["handbook"]["items"] == []
    a = await played(api, card["id"], ("灯塔的灯还亮着吗？", "亮着，油快用完了。"))
    b = await played(api, card["id"], ("渡船什么时候来？", "三天后，雾散了才来。"))
    synced = await api.call("POST", f"/v1/cards/{card['id']}/memory/sync")
    assert (synced["recapped"], synced["forgotten"], synced["merged"]) == (2, 0, True)
    memory = await api.call("GET", f"/v1/cards/{card['id']}/memory")
    assert memory["version"] == synced["memory"]["version"] > 0 and not memory["merge_due"]
    assert {r["story_id"] for r in memory["recaps"]} == {a["id"], b["id"]}
    assert {block["story_id"] for block in memory["handbook"]["blocks"]} == {a["id"], b["id"]}
    assert "油快用完了" in memory["handbook"]["text"] and memory["resident"]
    assert all(r["author"] == "offline" and r["last_node_id"] for r in memory["recaps"])

    again = await api.call("POST", f"/v1/cards/{card['id']}/memory/sync")
    assert (again["recapped"], again["merged"], again["memory"]["version"]) == (0, False, memory["version"])

    await api.call("DELETE", f"/v1/stories/{a['id']}", status=204)
    forgot = await api.call("POST", f"/v1/cards/{card['id']}/memory/sync")
    assert (forgot["forgotten"], forgot["merged"]) == (1, True)
    blocks = forgot["memory"]["handbook"]["blocks"]
    assert [block["story_id"] for block in blocks] == [b["id"]] and "油快用完了" not in forgot["memory"]["handbook"][
        "text"
    ]
    assert [r["forgotten"] for r in forgot["memory"]["recaps"] if r["story_id"] == a["id"]] == [True]

    await other.call("GET", f"/v1/cards/{card['id']}/memory", status=404)
    await other.call("POST", f"/v1/cards/{card['id']}/memory/sync", status=404)
