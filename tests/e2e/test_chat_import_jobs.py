"""An imported long chat leaves its side work to jobs: a scribe job per reply and the compaction are
scheduled, none run inline, and once they settle the context holds digests and episodes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.builders import TENANT, Api, MakeClient, api_for
from tests.e2e.chat_import_support import GREETINGS, header, imported, jsonl, keeper, message
from tests.scene_support import FAST_JOBS, SETTLED

pytestmark = pytest.mark.both_stores


def long_chat(turns: int) -> bytes:
    rows = [header(), message(GREETINGS[0], 0, user=False)]
    for i in range(1, turns + 1):
        rows.append(message(f"第{i}问：灯塔今晚还亮着吗？渡船什么时候到？雾会不会散？", 2 * i - 1, user=True))
        rows.append(message(f"第{i}答：亮着。渡船第{i}天会来，雾到傍晚才散，你先把窗关好。", 2 * i, user=False))
    return jsonl(*rows)


async def settled_jobs(api: Api, story_id: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        glance: dict[str, Any] = await api.call("GET", f"/v1/stories/{story_id}/jobs")
        if glance["settled"]:
            return glance
        assert asyncio.get_running_loop().time() < deadline, f"jobs not settled in {timeout}s: {glance}"
        await asyncio.sleep(0.05)


async def test_an_imported_long_chat_schedules_its_compaction_as_jobs(make_client: MakeClient) -> None:
    api = api_for(await make_client(embedder="hashing", **FAST_JOBS), TENANT)  # e5 would embed 200 archived turns
    card = await keeper(api)
    small = {"keep_turns": 4, "pack_turns": 10, "min_pack_chars": 0, "fill_window": False}  # packs of 10 turns, shown
    await api.call("PATCH", f"/v1/cards/{card['id']}", {"settings": small})
    answer = await imported(api, card["id"], long_chat(200))
    story_id = answer["story"]["id"]
    assert (answer["steps"], answer["nodes"]) == (400, 401)
    leaf = answer["story"]["leaf_id"]
    compacts = (await api.call("GET", f"/v1/jobs?story_id={story_id}&kind=compact&limit=500"))["items"]
    assert compacts and compacts[0]["node_id"] == leaf  # announced by the import's last reply
    assert all(j["status"] in ("pending", "running", "retrying", *SETTLED) for j in compacts)
    glance = await api.call("GET", f"/v1/stories/{story_id}/jobs")
    assert sum(glance["counts"].values()) == 200 + 1  # a scribe job per reply, and the compaction: none run inline

    glance = await settled_jobs(api, story_id)
    assert glance["counts"].get("failed", 0) == 0, glance
    compacts = (await api.call("GET", f"/v1/jobs?story_id={story_id}&kind=compact&limit=500"))["items"]
    assert compacts and all(j["status"] == "done" for j in compacts), compacts
    context = await api.call("GET", f"/v1/stories/{story_id}/context")
    kinds = [b["what"] for b in context["explain"]]
    assert "digest" in kinds and "episode" in kinds, kinds
    summaries = await api.call("GET", f"/v1/stories/{story_id}/summaries")
    assert summaries["uncovered_turns"] < 4 + 10  # one job caught up: no pack is still due
    assert all(e["last_turn"] - e["first_turn"] == 9 for e in summaries["episodes"])
