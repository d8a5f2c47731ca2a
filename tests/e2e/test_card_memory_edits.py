"""A card's memory edited and audited through the HTTP API: an item traced to the recaps and path spans
behind it, a story forgotten at the user's word (and kept forgotten when restored), the resident summary,
a recap and the handbook rewritten against the version read (a stale one is 409), a handbook without
tags refused."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from tests.builders import Api

pytestmark = pytest.mark.both_stores


async def synced(api: Api) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    card = await api.card()
    stories = []
    for user, reply in (("灯塔的灯还亮着吗？", "亮着，油快用完了。"), ("渡船什么时候来？", "三天后。")):
        story = await api.story(card["id"])
        await api.turn(story["id"], user, reply)
        stories.append(story)
    done = await api.call("POST", f"/v1/cards/{card['id']}/memory/sync")
    return card["id"], stories, done["memory"]


async def test_an_item_is_traced_to_the_recaps_and_spans_behind_it(api: Api, other: Api) -> None:
    card_id, (a, b), memory = await synced(api)
    tags = "".join(f"[局:{story['id'].replace('-', '')[:8]}]" for story in (a, b))
    text = memory["handbook"]["text"] + f"\n# 世界既定事实（跨局）\n- 渡船三天一班 {tags}\n"
    edited = await api.call("PUT", f"/v1/cards/{card_id}/memory/handbook", {"text": text})
    (item,) = [i for i in edited["handbook"]["items"] if i["text"] == "渡船三天一班"]
    assert set(item["sources"]) == {a["id"], b["id"]}
    audit = await api.call("GET", f"/v1/cards/{card_id}/memory/items/{item['item_id']}")
    assert audit["item"] == item and {s["story_id"] for s in audit["sources"]} == {a["id"], b["id"]}
    paths = {story["id"]: await api.call("GET", f"/v1/stories/{story['id']}/path") for story in (a, b)}
    for source in audit["sources"]:  # (the span: the path the recap read, down to its leaf then)
        nodes = [n["id"] for n in paths[source["story_id"]]["nodes"]]
        assert source["recap"]["last_node_id"] == nodes[-1] and source["recap"]["first_node_id"] in nodes
    await api.call("GET", f"/v1/cards/{card_id}/memory/items/000000000000", status=404)
    await other.call("GET", f"/v1/cards/{card_id}/memory/items/{item['item_id']}", status=404)


async def test_a_story_forgotten_at_the_users_word_stays_forgotten_when_restored(api: Api) -> None:
    card_id, (a, b), _ = await synced(api)
    forgot = await api.call("POST", f"/v1/cards/{card_id}/memory/forget", {"story_id": a["id"]})
    assert [block["story_id"] for block in forgot["handbook"]["blocks"]] == [b["id"]]
    await api.call("DELETE", f"/v1/stories/{a['id']}", status=204)
    await api.call("POST", f"/v1/stories/{a['id']}/restore")
    again = await api.call("POST", f"/v1/cards/{card_id}/memory/sync")
    assert again["remembered"] == 0 and [b_["story_id"] for b_ in again["memory"]["handbook"]["blocks"]] == [b["id"]]
    await api.call("POST", f"/v1/cards/{card_id}/memory/forget", {"story_id": str(uuid4())}, status=404)


async def test_edits_are_made_against_the_version_read_and_kept_by_later_merges(api: Api) -> None:
    card_id, (a, _), memory = await synced(api)
    version = memory["version"]
    stale = {"If-Match": f'"{version - 1}"'}
    await api.call("PUT", f"/v1/cards/{card_id}/memory/resident", {"text": "旧的"}, status=409, headers=stale)
    edited = await api.call(
        "PUT",
        f"/v1/cards/{card_id}/memory/resident",
        {"text": "用户写的常驻摘要"},
        headers={"If-Match": f'"{version}"'},
    )
    assert edited["resident"] == "用户写的常驻摘要" and edited["version"] == version + 1
    recap = await api.call(
        "PUT", f"/v1/cards/{card_id}/memory/recaps/{a['id']}", {"text": "# 用户的复盘\n## 剧情脉络\n风暴夜。"}
    )
    assert [r["author"] for r in recap["recaps"] if r["story_id"] == a["id"]] == ["user"]
    merged = await api.call("POST", f"/v1/cards/{card_id}/memory/sync")
    assert merged["merged"] and merged["memory"]["resident"] == "用户写的常驻摘要"
    assert "风暴夜" in merged["memory"]["handbook"]["text"]
    text = merged["memory"]["handbook"]["text"] + "\n# 世界既定事实（跨局）\n- 没有标签的一条\n"
    await api.call("PUT", f"/v1/cards/{card_id}/memory/handbook", {"text": text}, status=422)
    kept = merged["memory"]["handbook"]["text"].replace("风暴夜", "风暴夜（用户改）")
    rewritten = await api.call("PUT", f"/v1/cards/{card_id}/memory/handbook", {"text": kept})
    assert "风暴夜（用户改）" in rewritten["handbook"]["text"]


async def test_the_memorys_history_is_read_event_by_event_a_page_at_a_time(api: Api, other: Api) -> None:
    card_id, (a, b), memory = await synced(api)
    await api.call(
        "PUT", f"/v1/cards/{card_id}/memory/resident", {"text": "改"}, headers={"If-Match": f'"{memory["version"]}"'}
    )
    whole = await api.call("GET", f"/v1/cards/{card_id}/memory/history")
    types = [e["type"] for e in whole["events"]]
    assert types == ["CardMemoryBegun", "RecapWritten", "RecapWritten", "MemoryMerged", "ResidentEdited"]
    assert [e["version"] for e in whole["events"]] == [1, 2, 3, 4, 5] and whole["next_after"] is None
    assert {e["data"]["story_id"] for e in whole["events"][1:3]} == {a["id"], b["id"]}
    first = await api.call("GET", f"/v1/cards/{card_id}/memory/history?limit=2")
    rest = await api.call("GET", f"/v1/cards/{card_id}/memory/history?after={first['next_after']}")
    assert [e["version"] for e in first["events"] + rest["events"]] == [1, 2, 3, 4, 5]
    assert first["next_after"] == 2 and rest["next_after"] is None
    await other.call("GET", f"/v1/cards/{card_id}/memory/history", status=404)
