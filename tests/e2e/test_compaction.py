"""Compaction end to end: packs announced by finished replies and run as jobs (offline summarizer or
the side model), the 【前情提要】 message, the summaries endpoint, manual compaction, edits that later
folds keep, and the side model's digest request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Status, Step, Text
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, settled, side_model

pytestmark = pytest.mark.both_stores

SMALL = {"keep_turns": 2, "pack_turns": 3, "episodes_kept": 1, "min_pack_chars": 0, "fill_window": False}


@pytest.fixture
async def fast(make_client: MakeClient) -> Api:
    return api_for(await make_client(**FAST_JOBS), TENANT)


async def play(api: Api, story_id: str, turns: range) -> list[tuple[str, str]]:
    return [await api.turn(story_id, f"第{i}问：灯还亮着吗？", f"第{i}答：亮着，渡船第{i}天会来。") for i in turns]


async def summaries(api: Api, story_id: str, at: str | None = None) -> dict[str, Any]:
    return await api.call("GET", f"/v1/stories/{story_id}/summaries" + (f"?at={at}" if at else ""))  # type: ignore[no-any-return]


async def test_packs_run_as_jobs_and_the_context_opens_with_the_summaries(fast: Api) -> None:
    story = await fast.story(**SMALL)
    turns = await play(fast, story["id"], range(1, 9))
    await settled(fast, story["id"])
    compacts = [j for j in (await fast.call("GET", f"/v1/jobs?story_id={story['id']}&kind=compact"))["items"]]
    assert [j["node_id"] for j in compacts] == [turns[4][1], turns[7][1]]  # due at 2 + 3 turns, then every 3
    assert all(j["status"] == "done" and "episode of turns" in j["detail"] for j in compacts)

    layers = await summaries(fast, story["id"])
    assert layers["digest"]["last_turn"] == 3 and layers["digest"]["covers"][0] == 0
    assert [(e["first_turn"], e["last_turn"]) for e in layers["episodes"]] == [(4, 6)]
    assert layers["episodes"][0]["node_id"] == turns[5][1] and layers["uncovered_turns"] == 2
    assert set(layers["digest"]["sections"]) == {"前情提要", "人物", "承诺与伏笔", "事实账", "当前场景"}

    await fast.append(story["id"], "user", "第9问")
    context = await fast.call("GET", f"/v1/stories/{story['id']}/context")
    first = context["messages"][1]
    assert first["role"] == "user" and first["content"].startswith("【前情提要】以下是更早剧情的接力摘要，是既定事实：")
    assert "## 前情提要" in first["content"] and "### 第4–6轮" in first["content"]
    kinds = [b["what"] for b in context["explain"]]
    assert kinds[:4] == ["system", "digest", "episode", "verbatim"]
    verbatim = next(b for b in context["explain"] if b["what"] == "verbatim")
    # the verbatim path opens with the user's words: they follow the summaries in the same message (roles alternate)
    assert "第7问" in first["content"] and context["messages"][2]["role"] == "assistant"
    assert len(verbatim["node_ids"]) == 4  # turns 7 and 8
    assert context["tokens"] == sum(b["tokens"] for b in context["explain"])


async def test_an_anchor_inside_a_pack_is_quoted_word_for_word(fast: Api) -> None:
    story = await fast.story(**SMALL)
    turns = await play(fast, story["id"], range(1, 3))
    await fast.call("POST", f"/v1/nodes/{turns[0][1]}/star")
    await play(fast, story["id"], range(3, 6))
    await settled(fast, story["id"])
    context = await fast.call("GET", f"/v1/stories/{story['id']}/context")
    anchors = next(b for b in context["explain"] if b["what"] == "anchors")
    assert anchors["node_ids"] == [turns[0][1]]
    assert "【锚点原文】\n- 第1轮 沈砚：第1答：亮着，渡船第1天会来。" in context["messages"][1]["content"]


async def test_a_manual_compact_packs_all_but_keep_turns_and_edits_survive_the_next_fold(fast: Api) -> None:
    story = await fast.story(keep_turns=2, pack_turns=0, episodes_kept=0)
    turns = await play(fast, story["id"], range(1, 41))
    done = await fast.call("POST", f"/v1/stories/{story['id']}/compact", {})
    assert "digest through turn 38" in done["done"] and done["episodes"] == [] and done["uncovered_turns"] == 2
    holder = done["digest"]["node_id"]
    assert holder == turns[37][1]
    edited = await fast.call(
        "PATCH", f"/v1/nodes/{holder}/summary", {"sections": {"承诺与伏笔": "- 沈砚答应过林舟：渡船来之前不熄灯。"}}
    )
    assert edited["digest"]["edited"] and edited["digest"]["sections"]["承诺与伏笔"].startswith("- 沈砚答应过林舟")
    problem = await fast.call("PATCH", f"/v1/nodes/{holder}/summary", {"sections": {"天气": "雨"}}, status=422)
    assert problem["errors"][0]["field"] == "body.sections"
    await play(fast, story["id"], range(41, 61))
    again = await fast.call("POST", f"/v1/stories/{story['id']}/compact", {})
    assert again["digest"]["last_turn"] == 58 and again["digest"]["node_id"] != holder
    assert "沈砚答应过林舟：渡船来之前不熄灯。" in again["digest"]["sections"]["承诺与伏笔"]  # the fold kept the edit
    problem = await fast.call("POST", f"/v1/stories/{story['id']}/compact", {}, status=422)
    assert "nothing to compact" in problem["detail"]


async def test_summary_edits_are_checked(fast: Api) -> None:
    story = await fast.story(**SMALL)
    turns = await play(fast, story["id"], range(1, 6))
    await settled(fast, story["id"])
    end = (await summaries(fast, story["id"]))["episodes"][0]["node_id"]
    edited = await fast.call("PATCH", f"/v1/nodes/{end}/summary", {"text": "沈砚守了七年灯塔。"})
    assert edited["episodes"][0]["text"] == "沈砚守了七年灯塔。" and edited["episodes"][0]["edited"]
    context = await fast.call("GET", f"/v1/stories/{story['id']}/context")
    assert "沈砚守了七年灯塔。" in context["messages"][1]["content"]
    problem = await fast.call("PATCH", f"/v1/nodes/{turns[4][1]}/summary", {"text": "x"}, status=422)
    assert problem["errors"][0]["field"] == "path.node_id"
    problem = await fast.call("PATCH", f"/v1/nodes/{end}/summary", {"sections": {"人物": "y"}}, status=422)
    assert "no digest" in problem["detail"]
    await fast.call("PATCH", f"/v1/nodes/{end}/summary", {}, status=422)


# --- the side model writes the summaries -------------------------------------------------------------


@pytest.fixture
async def side() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


def summarizer(body: dict[str, Any]) -> Step:
    system = body["messages"][0]["content"]
    if "五个二级标题" in system:
        return Text(
            "## 前情提要\n沈砚守灯，林舟来访。\n## 人物\n沈砚：寡言。\n## 承诺与伏笔\n渡船会来。\n"
            "## 事实账\n灯油够七天。\n## 当前场景\n深夜，灯塔顶。"
        )
    turns = system and body["messages"][1]["content"].split("\n", 1)[0]
    return Text(f"模型摘要：{turns}")


async def test_the_side_model_writes_episodes_and_a_digest_from_the_previous_digest(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    side.fallback = summarizer  # type: ignore[assignment]
    api = api_for(await make_client(side_model=side_model(side), **FAST_JOBS), TENANT)
    story = await api.story(**SMALL)
    await play(api, story["id"], range(1, 12))
    await settled(api, story["id"])
    requests = [
        r for r in side.requests if "场记" in r["messages"][0]["content"] and "摘要" in r["messages"][0]["content"]
    ]
    digests = [r for r in requests if "五个二级标题" in r["messages"][0]["content"]]
    assert len(digests) == 2
    second = digests[1]["messages"][1]["content"]
    assert "【旧摘要】\n## 前情提要\n沈砚守灯，林舟来访。" in second  # the previous digest is folded in
    assert "【分段摘要】\n### 第4–6轮\n模型摘要：【对话记录 · 第4–6轮】" in second  # with the episode it absorbs
    latest = second.split("【最近原文】\n", 1)[1]
    assert "第5问" in latest and "第6答" in latest and "第4问" not in latest  # 当前场景 from the latest turns
    layers = await summaries(api, story["id"])
    assert layers["digest"]["author"] == "model" and layers["digest"]["sections"]["当前场景"] == "深夜，灯塔顶。"
    assert layers["episodes"][0]["text"].startswith("模型摘要：") and layers["episodes"][0]["author"] == "model"
    costs = await api.call("GET", f"/v1/stories/{story['id']}/costs")
    assert {line["purpose"] for line in costs["lines"]} >= {"episode", "digest"}


async def test_a_context_over_its_budget_schedules_a_pack(fast: Api) -> None:
    story = await fast.story(keep_turns=2, pack_turns=0, context_window=1024, reply_reserve=0)
    long = "风从北边来，灯塔的玻璃嗡嗡作响，沈砚把油灯挪到窗边，说渡船还要三天。" * 3
    for i in range(1, 13):
        await fast.turn(story["id"], f"第{i}问：{long}", f"第{i}答：{long}")
    context = await fast.call("GET", f"/v1/stories/{story['id']}/context")
    rows = await settled(fast, story["id"])
    packs = [r for r in rows.values() if r["kind"] == "compact"]
    assert packs and all(r["status"] == "done" for r in packs)  # announced by the replies that outgrew it
    after = await fast.call("GET", f"/v1/stories/{story['id']}/context")
    assert after["explain"][1]["what"] in ("digest", "episode") and after["tokens"] < context["tokens"] + 400
    assert (await summaries(fast, story["id"]))["uncovered_turns"] == 2


async def test_a_story_that_fell_behind_is_brought_up_to_date_by_one_job(fast: Api) -> None:
    story = await fast.story(keep_turns=2, pack_turns=0, episodes_kept=1, min_pack_chars=0)
    await play(fast, story["id"], range(1, 31))
    await fast.call("PATCH", f"/v1/stories/{story['id']}", {"settings": {"pack_turns": 3}})
    await play(fast, story["id"], range(31, 34))  # turn 33: far past due, announced on a multiple of 3
    rows = await settled(fast, story["id"])
    (job,) = [r for r in rows.values() if r["kind"] == "compact"]
    assert job["status"] == "done" and job["detail"].startswith("10 episodes of turns 0–30")
    layers = await summaries(fast, story["id"])
    assert layers["uncovered_turns"] == 3 and layers["digest"]["last_turn"] == 27 and len(layers["episodes"]) == 1


async def test_engine_turns_announce_packs_and_see_the_summaries(fake: FakeModelServer, make_engine: Any) -> None:
    engine = await make_engine(**FAST_JOBS)
    fake.fallback = lambda body: Text("灯还亮着，渡船三天后到。")  # type: ignore[assignment]
    story = await engine.story(**SMALL, recall_k=0)  # (recall may bring a packed turn back, once its index is built)
    for i in range(1, 7):
        await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": f"第{i}问：灯还亮着吗？"}, 201)
    await settled(engine, story["id"])
    layers = await summaries(engine, story["id"])
    assert [(e["first_turn"], e["last_turn"]) for e in layers["episodes"]] == [(0, 3)]
    await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": "第7问"}, 201)
    sent = fake.requests[-1]["messages"]
    assert sent[1]["role"] == "user" and sent[1]["content"].startswith("【前情提要】")
    assert "第4问" in str(sent) and "第1问" not in str(sent[2:])  # the packed turns are only in the summary


async def test_an_engine_turn_whose_context_overflows_announces_the_budget_pack(
    fake: FakeModelServer, make_engine: Any
) -> None:
    engine = await make_engine(**FAST_JOBS)
    long = "风从北边来，灯塔的玻璃嗡嗡作响，沈砚把油灯挪到窗边，说渡船还要三天。" * 3
    fake.fallback = lambda body: Text(long)  # type: ignore[assignment]
    story = await engine.story(keep_turns=2, pack_turns=0, context_window=1024, reply_reserve=0)
    for i in range(1, 13):
        await engine.call("POST", f"/v1/stories/{story['id']}/turns", {"text": f"第{i}问：{long}"}, 201)
    rows = await settled(engine, story["id"])
    packs = [r for r in rows.values() if r["kind"] == "compact"]
    assert packs and all(r["status"] == "done" for r in packs)  # compaction is off: only the budget asked
    assert (await summaries(engine, story["id"]))["episodes"]  # the packs were made from the turns' openings


@pytest.mark.parametrize("max_attempts", [1, 2])
async def test_the_offline_summarizer_runs_before_the_last_attempt_whatever_the_setting(
    side: FakeModelServer, make_client: MakeClient, max_attempts: int
) -> None:
    side.fallback = lambda body: Status(500)  # type: ignore[assignment,return-value]  # the side model is down
    settings = {**FAST_JOBS, "job_max_attempts": max_attempts}
    api = api_for(await make_client(side_model=side_model(side), **settings), TENANT)
    story = await api.story(**SMALL)
    await play(api, story["id"], range(1, 6))
    await settled(api, story["id"])
    compacts = (await api.call("GET", f"/v1/jobs?story_id={story['id']}&kind=compact"))["items"]
    assert compacts and all(j["status"] == "done" for j in compacts), compacts
    layers = await summaries(api, story["id"])
    assert layers["episodes"] and {e["author"] for e in layers["episodes"]} == {"extractive"}


async def test_an_edited_summary_is_in_the_next_context_after_one_was_read_before_it(fast: Api) -> None:
    story = await fast.story(**SMALL)
    await play(fast, story["id"], range(1, 9))
    await settled(fast, story["id"])
    layers = await summaries(fast, story["id"])
    episode, digest = layers["episodes"][0]["node_id"], layers["digest"]["node_id"]
    before = await fast.call("GET", f"/v1/stories/{story['id']}/context")  # (a context read: its caches filled)
    assert "第4问" in before["messages"][1]["content"] or "### 第4–6轮" in before["messages"][1]["content"]
    await fast.call("PATCH", f"/v1/nodes/{episode}/summary", {"text": "沈砚守了七年灯塔。"})
    after = await fast.call("GET", f"/v1/stories/{story['id']}/context")
    assert "沈砚守了七年灯塔。" in after["messages"][1]["content"]
    await fast.call("PATCH", f"/v1/nodes/{digest}/summary", {"sections": {"承诺与伏笔": "- 渡船来之前不熄灯。"}})
    last = await fast.call("GET", f"/v1/stories/{story['id']}/context")
    assert (
        "渡船来之前不熄灯。" in last["messages"][1]["content"]
        and "沈砚守了七年灯塔。" in last["messages"][1]["content"]
    )
    assert last["tokens"] == sum(b["tokens"] for b in last["explain"])
