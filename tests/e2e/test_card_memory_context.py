"""A card's memory at work, through the HTTP API: the background sweep recaps a story once it is quiet
(or after its turns) and merges, with no call from the client; a new story of the card carries the
resident summary in its 【前情提要】 message from its first turn, with its version in the explain list, and
what the card's memory holds on the user's words in a 【往事回忆】 block, each passage with its story;
a story set not to carry it does not; the side model writes the recaps and the merge when there is one,
and a merge answer that names a story it does not know is refused with nothing kept, then the offline
rules merge."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from providers.fake_memory import memory_writer
from providers.fake_server import FakeModelServer, Step, Text
from schedulers import memory_sweep
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, side_model

FAST_MEMORY: dict[str, Any] = {**FAST_JOBS, "memory_sweep_seconds": 0.2}


async def memory_when(api: Api, card_id: str, ready: Any, timeout: float = 20.0) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        memory: dict[str, Any] = await api.call("GET", f"/v1/cards/{card_id}/memory")
        if ready(memory):
            return memory
        assert asyncio.get_running_loop().time() < deadline, f"the memory never got there: {memory}"
        await asyncio.sleep(0.1)


async def played(api: Api, card_id: str, turns: list[tuple[str, str]], **settings: Any) -> dict[str, Any]:
    story = await api.story(card_id, **settings)
    for user, reply in turns:
        await api.turn(story["id"], user, reply)
    return story


LIGHTHOUSE = [
    ("灯塔的灯还亮着吗？", "亮着，油快用完了，守塔人老周说下个月换新油。"),
    ("那把旧伞呢？", "旧伞挂在门后，伞骨断了一根。"),
]


async def test_a_quiet_story_is_recapped_and_merged_by_itself_and_a_new_story_carries_the_resident_summary(
    make_client: MakeClient,
) -> None:
    api = api_for(await make_client(**FAST_MEMORY), TENANT)
    card = await api.card()
    first = await played(api, card["id"], LIGHTHOUSE, recap_quiet_minutes=0)
    memory = await memory_when(api, card["id"], lambda m: m["recaps"] and not m["merge_due"] and m["resident"])
    assert [r["story_id"] for r in memory["recaps"]] == [first["id"]]
    assert "油快用完了" in memory["handbook"]["text"]

    await api.append(first["id"], "user", "还有别的事吗？")  # (the story the memory holds alone: not told itself)
    own = await api.call("GET", f"/v1/stories/{first['id']}/context")
    assert not [b for b in own["explain"] if b["what"] in ("resident", "memory")]

    second = await api.story(card["id"])
    await api.append(second["id"], "user", "我又来了。")
    context = await api.call("GET", f"/v1/stories/{second['id']}/context")
    opening = context["messages"][1]
    assert opening["role"] == "user" and opening["content"].startswith("【前情提要】")
    assert "油快用完了" in opening["content"]
    (block,) = [b for b in context["explain"] if b["what"] == "resident"]
    later = await api.call("GET", f"/v1/cards/{card['id']}/memory")  # (the sweep may merge again meanwhile)
    assert memory["version"] <= block["version"] <= later["version"]
    assert block["message_index"] == 1 and f"v{block['version']}" in block["why"]
    start, end = block["span"]
    assert "油快用完了" in opening["content"][start:end]
    roles = [m["role"] for m in context["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles

    for _ in range(20):  # (a short resident of the user's: the rest is recalled; the first story's new words
        # may be recapped and merged meanwhile, which makes the version read stale: read it again)
        current = await api.call("GET", f"/v1/cards/{card['id']}/memory")
        headers = {"If-Match": f'"{current["version"]}"'}
        path, text = f"/v1/cards/{card['id']}/memory/resident", {"text": "沈砚守着北屿灯塔。"}
        async with api.client.put(path, json=text, headers={**api.headers, **headers}) as response:
            if response.status == 200:
                break
            assert response.status == 409, await response.text()
    else:
        raise AssertionError("the resident summary was never written")
    asking = await api.story(card["id"])
    await api.append(asking["id"], "user", "守塔人老周换新油了吗？")
    recalled = await api.call("GET", f"/v1/stories/{asking['id']}/context")
    (found,) = [b for b in recalled["explain"] if b["what"] == "memory"]
    last = recalled["messages"][found["message_index"]]["content"]
    start, end = found["span"]
    assert last[start:end].startswith("【往事回忆】") and "下个月换新油" in last[start:end]
    assert found["memory"] and all(ref["sources"] == [first["id"]] for ref in found["memory"])
    assert last.endswith("守塔人老周换新油了吗？")

    third = await api.story(card["id"], card_memory=False)
    await api.append(third["id"], "user", "我又来了。")
    plain = await api.call("GET", f"/v1/stories/{third['id']}/context")
    assert not [b for b in plain["explain"] if b["what"] in ("resident", "memory")]
    assert "油快用完了" not in "".join(m["content"] for m in plain["messages"])


async def test_a_story_being_played_is_not_recapped_until_its_turns_add_up(make_client: MakeClient) -> None:
    api = api_for(await make_client(**FAST_MEMORY), TENANT)
    card = await api.card()
    story = await played(api, card["id"], LIGHTHOUSE[:1], recap_turns=3)
    await asyncio.sleep(1.0)  # several sweeps: one turn of three, and no quiet spell (10 minutes by default)
    assert (await api.call("GET", f"/v1/cards/{card['id']}/memory"))["recaps"] == []
    for i in range(2):
        await api.turn(story["id"], f"第{i}句。", f"第{i}答。")
    memory = await memory_when(api, card["id"], lambda m: m["recaps"] and not m["merge_due"])
    (recap,) = memory["recaps"]
    leaf = (await api.call("GET", f"/v1/stories/{story['id']}"))["leaf_id"]
    assert (recap["turns"], recap["last_node_id"]) == (3, leaf)  # (recapped at the third turn, whole)


async def test_the_side_model_writes_recaps_and_merges_and_a_merge_naming_an_unknown_story_is_refused(
    make_client: MakeClient, fake: FakeModelServer
) -> None:
    writer = memory_writer()
    bad_merges = [2]  # the first two merge answers name a story the card does not have

    def side(body: Any) -> Step:
        answer = writer(body)
        system = body["messages"][0]["content"]
        if "记忆手册" in system and bad_merges[0] > 0:
            bad_merges[0] -= 1
            assert isinstance(answer, Text) and isinstance(answer.text, str)
            return Text(
                answer.text.replace("# 常驻摘要", "# 世界既定事实（跨局）\n- 编造的 [局:deadbeef]\n\n# 常驻摘要")
            )
        return answer

    fake.fallback = side
    api = api_for(await make_client(side_model=side_model(fake), **FAST_MEMORY), TENANT)
    card = await api.card()
    await played(api, card["id"], LIGHTHOUSE, recap_quiet_minutes=0)
    memory = await memory_when(api, card["id"], lambda m: m["recaps"] and not m["merge_due"])
    (recap,) = memory["recaps"]
    assert recap["author"] == "model"
    assert memory["merged_by"] == "offline"  # two refused answers, then the offline rules
    assert "deadbeef" not in memory["handbook"]["text"]
    asked = [b for b in fake.requests if "记忆手册" in b["messages"][0]["content"]]
    assert len(asked) == 2

    await played(api, card["id"], [("渡船什么时候来？", "三天后，雾散了才来。")], recap_quiet_minutes=0)
    memory = await memory_when(api, card["id"], lambda m: len(m["recaps"]) == 2 and not m["merge_due"])
    assert memory["merged_by"] == "model" and "雾散了才来" in memory["handbook"]["text"]
    assert "油快用完了" in memory["handbook"]["text"]  # (the first story's block and items kept)


async def test_a_story_carried_from_an_earlier_one_opens_with_its_recap(api: Api, other: Api) -> None:
    card = await api.card()
    earlier = await played(api, card["id"], LIGHTHOUSE)
    leaf = (await api.call("GET", f"/v1/stories/{earlier['id']}"))["leaf_id"]
    carried = await api.call("POST", "/v1/stories", {"card_id": card["id"], "carry_from": earlier["id"]}, 201)
    assert carried["carried_from"] == earlier["id"]
    await api.append(carried["id"], "user", "接着上回说。")
    context = await api.call("GET", f"/v1/stories/{carried['id']}/context")
    (prelude,) = [b for b in context["explain"] if b["what"] == "prelude"]
    opening = context["messages"][1]["content"]
    start, end = prelude["span"]
    assert opening.startswith("【前情提要】") and "伞骨断了一根" in opening[start:end]
    assert prelude["node_ids"] == [leaf] and earlier["id"] in prelude["why"]
    roles = [m["role"] for m in context["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles

    fresh = await api.story(card["id"])
    assert fresh["carried_from"] is None
    body = {"card_id": (await other.card())["id"], "carry_from": earlier["id"]}
    refused = await other.call("POST", "/v1/stories", body, 404)  # (another tenant's story)
    assert refused["errors"][0]["field"] == "body.carry_from"


async def test_stories_that_never_need_a_recap_do_not_keep_the_others_waiting(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_sweep, "ROWS", 2)  # (candidates read a page at a time)
    api = api_for(await make_client(**FAST_MEMORY), TENANT)
    card = await api.card()
    for _ in range(5):  # never recapped, and always candidates: their card memory is off
        await played(api, card["id"], LIGHTHOUSE[:1], card_memory=False)
    wanted = await played(api, card["id"], LIGHTHOUSE, recap_quiet_minutes=0)
    memory = await memory_when(api, card["id"], lambda m: m["recaps"] and not m["merge_due"])
    assert [r["story_id"] for r in memory["recaps"]] == [wanted["id"]]
