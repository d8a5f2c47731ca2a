"""Recall over HTTP: the recall query with its scores and retrievers, the index's state, the 【剧情记忆】
block in the context with its explain entry, and the errors."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import Api, MakeClient, api_for
from tests.integration.recall_support import TIGHT
from tests.scene_support import settled

pytestmark = pytest.mark.both_stores

FILLER = (
    "今天也在修灯塔的窗户，玻璃上全是盐霜，擦了一遍又一遍还是看不清外面的海。",
    "“窗框又松了，风一吹就响，明天得找几颗新钉子来。”",
)


async def test_recall_finds_an_old_turn_and_the_context_brings_it_back(make_client: MakeClient) -> None:
    api = api_for(await make_client(embedder="hashing"), "tenant-a")
    story = await api.story(**TIGHT)
    sid = story["id"]
    user, reply = await api.turn(sid, "地下室里有什么？", "“一箱旧银币，是守塔人的宝藏。”")
    for _ in range(20):
        await api.turn(sid, *FILLER)
    await settled(api, sid)  # the compactions the turns announced have archived their episodes
    found: dict[str, Any] = await api.call("GET", f"/v1/stories/{sid}/recall?q=银币宝藏&k=3")
    top = found["hits"][0]
    assert (top["node_id"], top["user_id"], top["turn"]) == (reply, user, 1) and top["hidden"] is False
    assert set(top["found_by"]) == {"bm25", "bm25_context", "dense"} and top["score"] > 0
    index = await api.call("GET", f"/v1/stories/{sid}/index")
    assert index["passages"] - index["summary_passages"] == 21 and index["summary_passages"] > 0
    assert index["behind"] is False and index["embedder"] == "hashing-ngram-v1" and index["dense"] is True
    await api.append(sid, "user", "那箱银币宝藏现在在哪里？")
    context = await api.call("GET", f"/v1/stories/{sid}/context")
    block = next(b for b in context["explain"] if b["what"] == "recall")
    assert reply in block["node_ids"] and len(block["scores"]) == len(block["node_ids"])
    assert block["message_index"] == len(context["messages"]) - 1
    assert "【剧情记忆】" in context["messages"][-1]["content"]


async def test_recall_needs_a_query_and_belongs_to_its_tenant(api: Api, other: Api, story: dict[str, Any]) -> None:
    problem = await api.call("GET", f"/v1/stories/{story['id']}/recall", status=422)
    assert problem["errors"][0]["field"] == "query.q"
    await api.call("GET", f"/v1/stories/{story['id']}/recall?q=x&k=0", status=422)
    await other.call("GET", f"/v1/stories/{story['id']}/recall?q=灯塔", status=404)
    await other.call("GET", f"/v1/stories/{story['id']}/index", status=404)
    empty = await api.call("GET", f"/v1/stories/{story['id']}/recall?q=灯塔")
    assert empty["hits"] == []
