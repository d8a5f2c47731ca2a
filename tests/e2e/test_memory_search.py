"""The main model's `memory_search` in engine mode: it finds an old turn on the reply's path (never one of
an abandoned branch), the model reads it as the tool's result, the search is recorded with the passages
found, word for word; bad arguments are refused, and with passive recall off it still searches."""

from __future__ import annotations

from typing import Any

import pytest

from providers.fake_server import FakeModelServer
from tests.builders import Api
from tests.fake_model import MakeEngine, calls, messages_of, post_turn, seal, write

pytestmark = pytest.mark.both_stores

FILLER = (
    "今天也在修灯塔的窗户，玻璃上全是盐霜，擦了一遍又一遍还是看不清外面的海。",
    "“窗框又松了，风一吹就响，明天得找几颗新钉子来。”",
)


async def events_of(api: Api, story_id: str, node_id: str) -> list[dict[str, Any]]:
    replay = await api.call("GET", f"/v1/stories/{story_id}/replay")
    return next(step["events"] for step in replay["steps"] if step["node_id"] == node_id)


async def test_the_model_searches_the_storys_memory_and_the_search_is_recorded(
    fake: FakeModelServer, make_engine: MakeEngine
) -> None:
    engine = await make_engine(embedder="hashing")
    sid = (await engine.story())["id"]
    hoard = await engine.append(sid, "user", "地下室里有什么？")
    reply = await engine.append(sid, "reply", "“一箱旧银币宝藏，是守塔人留下的。”")
    abandoned = await engine.append(sid, "reply", "“地下室里只有一窝老鼠和一箱金币。”", hoard["node"]["id"])
    await engine.call("POST", f"/v1/stories/{sid}/checkout", {"node_id": reply["node"]["id"]})
    for _ in range(3):
        await engine.turn(sid, *FILLER)

    fake.script(
        calls(("memory_search", {"query": "地下室 银币 金币", "k": 3})),
        calls(write(0, "“银币还在地下室。”")),
        calls(seal(1)),
    )
    turn = await post_turn(engine, sid, "那箱东西还在吗？")
    assert turn["outcome"] == "sealed"
    [result] = [t for t in turn["tools"] if t["name"] == "memory_search"]
    assert result["ok"] and "银币宝藏" in result["result"] and "老鼠" not in result["result"]
    [shown] = [m["content"] for m in messages_of(fake.requests[1], "tool")]
    assert "银币宝藏" in shown and "第1轮" in shown

    [searched] = [e for e in await events_of(engine, sid, turn["reply"]["id"]) if e["type"] == "MemorySearched"]
    assert searched["data"]["query"] == "地下室 银币 金币"
    nodes = [f["node_id"] for f in searched["data"]["found"]]
    assert reply["node"]["id"] in nodes and abandoned["node"]["id"] not in nodes
    assert [f["line"] for f in searched["data"]["found"]] == result["result"].split("\n")[1:]


async def test_bad_arguments_are_refused_and_recall_off_is_said(fake: FakeModelServer, make_engine: MakeEngine) -> None:
    engine = await make_engine(embedder="none")
    sid = (await engine.story(recall_k=0))["id"]
    await engine.turn(sid, "地下室里有什么？", "“一箱旧银币。”")
    fake.script(
        calls(("memory_search", {"query": ""}), ("memory_search", {"query": "银币", "k": 99})),
        calls(("memory_search", {"query": "银币"})),
        calls(write(0, "好。")),
        calls(seal(1)),
    )
    turn = await post_turn(engine, sid, "银币呢？")
    outcomes = [(t["ok"], t["result"]) for t in turn["tools"] if t["name"] == "memory_search"]
    assert [ok for ok, _ in outcomes] == [False, False, True]
    assert "query" in outcomes[0][1] and "k" in outcomes[1][1]
    assert "银币" in outcomes[2][1]  # BM25 alone still finds it: recall_k 0 only turns passive recall off
