"""Keeping the character itself, end to end: the identity anchor re-anchored every N turns and after
drift (on the next turn only, on the drifting branch only), `GET …/drift`, the anchored digest, and
the side model's summaries checked before they are stored."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from providers.fake_server import FakeModelServer, Step, Text
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, settled, side_model

pytestmark = pytest.mark.both_stores

CALM = "沈砚把灯芯剪短，说渡船还要三天才到，让你先去楼下烤火。"
ENGLISH = "As an AI language model, I must say the weather today is lovely and the ferry will come soon enough."


async def context_at(api: Api, story_id: str, at: str | None = None) -> dict[str, Any]:
    return await api.call("GET", f"/v1/stories/{story_id}/context" + (f"?at={at}" if at else ""))  # type: ignore[no-any-return]


def reanchor_of(context: dict[str, Any]) -> dict[str, Any] | None:
    blocks = [b for b in context["explain"] if b["what"] == "reanchor"]
    assert len(blocks) <= 1
    return blocks[0] if blocks else None


def block_text(context: dict[str, Any], block: dict[str, Any]) -> str:
    start, end = block["span"]
    return str(context["messages"][block["message_index"]]["content"][start:end])


async def test_every_n_turns_the_users_words_carry_the_identity_anchor(api: Api) -> None:
    card = await api.card(post_history_instructions="{{char}}从不离开灯塔。")
    story = await api.story(card["id"], reanchor_turns=3)
    for i in range(1, 3):
        await api.turn(story["id"], f"第{i}问：灯还亮着吗？", CALM)
    await api.append(story["id"], "user", "第3问：你会走吗？")
    context = await context_at(api, story["id"])
    block = reanchor_of(context)
    assert block is not None and "every 3 turns (turn 3)" in block["why"]
    text, last = block_text(context, block), context["messages"][-1]["content"]
    assert text.startswith("【身份锚点 · 沈砚】\n沈砚是北屿灯塔的守塔人。\n（定期重申") and "定期重申" in text
    assert last.count("沈砚从不离开灯塔。") == 1  # (the card's instructions, just before: not said twice)
    assert last.endswith("第3问：你会走吗？") and last.index(text) + len(text) + 2 == last.index("第3问")
    kinds = [b["what"] for b in context["explain"]]
    assert kinds[-2:] == ["reanchor", "user"] and kinds.index("instructions") < kinds.index("reanchor")
    assert context["tokens"] == sum(b["tokens"] for b in context["explain"])

    await api.append(story["id"], "reply", CALM)
    await api.append(story["id"], "user", "第4问")
    assert reanchor_of(await context_at(api, story["id"])) is None
    drift = await api.call("GET", f"/v1/stories/{story['id']}/drift")
    assert drift["next_periodic_turn"] == 6 and drift["reanchor_turns"] == 3 and drift["anchor_derived"]
    assert drift["anchor"] == "{{char}}是北屿灯塔的守塔人。\n{{char}}从不离开灯塔。"

    await api.call("PATCH", f"/v1/stories/{story['id']}", {"settings": {"reanchor_turns": 0}})
    await api.append(story["id"], "reply", CALM)
    for i in range(5, 7):
        await api.turn(story["id"], f"第{i}问", CALM)
    await api.append(story["id"], "user", "第7问")
    assert reanchor_of(await context_at(api, story["id"])) is None  # off


async def test_two_signals_force_a_reanchoring_on_the_next_turn_only_and_on_that_branch_only(api: Api) -> None:
    card = await api.card(description="{{char}}是北屿灯塔的守塔人，说话简短。")
    story = await api.story(card["id"], reanchor_turns=0, banned_patterns=["as an ai"])
    for i in range(1, 11):
        await api.turn(story["id"], f"第{i}问：灯还亮着吗？", CALM)
    await api.turn(story["id"], "第11问", ENGLISH)  # banned, and English once: one signal
    user, drifted = await api.turn(story["id"], "第12问", ENGLISH)  # banned and English twice: two
    one = await api.call("GET", f"/v1/stories/{story['id']}/drift?at={user}")
    assert one["fired"] == 1 and not one["forced"]
    drift = await api.call("GET", f"/v1/stories/{story['id']}/drift")
    assert drift["reply_id"] == drifted and drift["turn"] == 12 and drift["fired"] == 2 and drift["forced"]
    fired = {s["name"]: s for s in drift["signals"] if s["fired"]}
    assert set(fired) == {"banned", "language"} and fired["banned"]["evidence"].lower() == "as an ai"
    assert fired["language"]["replies"][-1] == drifted and fired["language"]["value"] >= 0.6

    words = (await api.append(story["id"], "user", "第13问"))["node"]["id"]
    context = await context_at(api, story["id"])
    block = reanchor_of(context)
    assert (
        block is not None and block["node_ids"] == [drifted] and f"forced by drift at reply {drifted}" in block["why"]
    )
    text = block_text(context, block)
    assert "换了语言" in text and "出现了角色卡禁止的写法" in text and "用中文回答" in text and "「As an AI」" in text
    roles = [m["role"] for m in context["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles

    await api.append(story["id"], "reply", CALM)  # back in character: the next turn is not forced again
    await api.append(story["id"], "user", "第14问")
    assert reanchor_of(await context_at(api, story["id"])) is None
    assert reanchor_of(await context_at(api, story["id"], words)) is not None  # (a read at the node still has it)

    # a regenerate of the drifting reply that stays in character is a branch of its own
    parent = (await api.call("GET", f"/v1/nodes/{drifted}"))["parent_id"]
    sibling = (await api.append(story["id"], "reply", CALM, parent_id=parent))["node"]["id"]
    await api.append(story["id"], "user", "第13问（另一条线）")
    assert reanchor_of(await context_at(api, story["id"])) is None
    branch = await api.call("GET", f"/v1/stories/{story['id']}/drift?at={sibling}")
    assert branch["fired"] == 1 and not branch["forced"]  # (only the English reply before it)


async def test_drift_settings_are_validated_on_the_card_and_the_story(api: Api) -> None:
    card = await api.card()
    problem = await api.call(
        "PATCH", f"/v1/cards/{card['id']}", {"settings": {"banned_patterns": ["(unclosed"]}}, status=422
    )
    assert problem["errors"][0]["field"].startswith("body.settings") and "pattern 0" in problem["errors"][0]["message"]
    story = await api.story(card["id"])
    problem = await api.call("PATCH", f"/v1/stories/{story['id']}", {"settings": {"drift_echo": 2}}, status=422)
    assert problem["errors"][0]["field"] == "body.settings.drift_echo"
    await api.call(
        "PATCH", f"/v1/cards/{card['id']}", {"settings": {"identity_anchor": "沈砚：守塔人，话少，护着{{user}}。"}}
    )
    drift = await api.call("GET", f"/v1/stories/{story['id']}/drift")
    assert drift["anchor"] == "沈砚：守塔人，话少，护着{{user}}。" and not drift["anchor_derived"]
    assert drift["reply_id"] is None and drift["signals"] == [] and not drift["forced"]
    await api.call("GET", f"/v1/stories/{story['id']}/drift?at=not-a-node", status=422)


# --- summaries: anchored and checked ---------------------------------------------------------------

SMALL = {"keep_turns": 2, "pack_turns": 3, "episodes_kept": 1, "min_pack_chars": 0, "fill_window": False}
GOOD_DIGEST = (
    "## 前情提要\n沈砚守灯，林舟来访。\n## 人物\n- 沈砚：寡言。\n## 承诺与伏笔\n渡船会来。\n"
    "## 事实账\n灯油够七天。\n## 当前场景\n深夜，灯塔顶。"
)


@pytest.fixture
async def side() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


def is_digest(body: dict[str, Any]) -> bool:
    return "五个二级标题" in body["messages"][0]["content"]


def is_episode(body: dict[str, Any]) -> bool:
    return "接力摘要" in body["messages"][0]["content"] and not is_digest(body)


async def play(api: Api, story_id: str, turns: range) -> None:
    for i in turns:
        await api.turn(story_id, f"第{i}问：灯还亮着吗？", f"第{i}答：亮着，渡船第{i}天会来。")


async def test_a_summary_that_fails_its_checks_twice_never_reaches_a_context(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    def badly(body: dict[str, Any]) -> Step:
        if is_digest(body):  # sections missing, a name nobody met
            return Text("## 前情提要\n沈砚守灯。\n## 人物\n- 赵无极：神秘的剑客。")
        if is_episode(body):
            return Text("作为AI，我无法总结这段对话。")  # the card bans it
        return Text("{}")

    side.fallback = badly  # type: ignore[assignment]
    api = api_for(await make_client(side_model=side_model(side), **FAST_JOBS), TENANT)
    story = await api.story(**SMALL, banned_patterns=["作为AI"])
    await play(api, story["id"], range(1, 9))
    rows = await settled(api, story["id"])
    compacts = [r for r in rows.values() if r["kind"] == "compact"]
    assert compacts and all(r["status"] == "done" for r in compacts)
    details = " ".join(r["detail"] for r in compacts)
    assert "failed its checks twice (" in details and "a banned pattern found (作为AI)" in details
    assert "sections missing: 承诺与伏笔、事实账、当前场景" in details and "赵无极" in details
    layers = await api.call("GET", f"/v1/stories/{story['id']}/summaries")
    assert layers["digest"]["author"] == "extractive" and all(e["author"] == "extractive" for e in layers["episodes"])

    await api.append(story["id"], "user", "第9问")
    context = await context_at(api, story["id"])
    sent = "".join(m["content"] for m in context["messages"])
    assert "作为AI" not in sent and "赵无极" not in sent and "## 前情提要" in sent
    retries = [r for r in side.requests if is_episode(r) and len(r["messages"]) == 4]
    assert retries and "出现了角色卡禁止的写法（「作为AI」）" in retries[0]["messages"][3]["content"]
    costs = await api.call("GET", f"/v1/stories/{story['id']}/costs")
    episodes = sum(line["calls"] for line in costs["lines"] if line["purpose"] == "episode")
    assert episodes >= 4  # (two episodes at least, each asked for twice)


async def test_a_summary_fixed_on_the_second_ask_is_the_models_and_the_digest_opens_with_the_anchor(
    side: FakeModelServer, make_client: MakeClient
) -> None:
    def once_bad(body: dict[str, Any]) -> Step:
        if is_digest(body):
            return Text(GOOD_DIGEST if len(body["messages"]) > 2 else "## 前情提要\n沈砚守灯。")
        if is_episode(body):
            return Text("模型摘要：沈砚守着灯，说渡船会来。")
        return Text("{}")

    side.fallback = once_bad  # type: ignore[assignment]
    api = api_for(await make_client(side_model=side_model(side), **FAST_JOBS), TENANT)
    anchor = {"identity_anchor": "{{char}}：北屿灯塔的守塔人，话少，从不离开灯塔。"}
    card = await api.call("POST", "/v1/cards", {"card": {"name": "沈砚"}, "settings": anchor}, 201)
    story = await api.story(card["id"], **SMALL)
    await play(api, story["id"], range(1, 9))
    await settled(api, story["id"])
    layers = await api.call("GET", f"/v1/stories/{story['id']}/summaries")
    assert layers["digest"]["author"] == "model" and layers["digest"]["sections"]["当前场景"] == "深夜，灯塔顶。"
    digests = [r for r in side.requests if is_digest(r)]
    assert "沈砚：北屿灯塔的守塔人，话少，从不离开灯塔。" in digests[0]["messages"][0]["content"]  # the anchor carried
    assert "没有通过检查：缺少这些小节：人物、承诺与伏笔、事实账、当前场景。" in digests[1]["messages"][3]["content"]

    await api.append(story["id"], "user", "第9问")
    context = await context_at(api, story["id"])
    digest = next(b for b in context["explain"] if b["what"] == "digest")
    text = block_text(context, digest)
    assert "【身份锚点 · 沈砚】\n沈砚：北屿灯塔的守塔人，话少，从不离开灯塔。\n\n## 前情提要" in text
    assert "opened by the identity anchor" in digest["why"]


async def test_a_reply_after_which_the_re_anchoring_would_not_fit_announces_a_pack(make_client: MakeClient) -> None:
    api = api_for(await make_client(**FAST_JOBS), TENANT)
    line = "风从北边来，灯塔的玻璃嗡嗡作响，沈砚把油灯挪到窗边，说渡船还要三天。"  # (about 40 tokens)
    anchor = "{{char}}：北屿灯塔的守塔人，话少，从不离开灯塔，护着{{user}}。" * 48  # (about 1,100 tokens)
    stories = []
    for every in (6, 0):  # the same story, re-anchoring at turn 6 or never
        settings = {
            "context_window": 1500,
            "reply_reserve": 0,
            "pack_turns": 0,
            "keep_turns": 1,
            "min_pack_chars": 0,
            "recall_k": 0,
        }
        story = await api.story(**settings, reanchor_turns=every, identity_anchor=anchor, card_memory=False)
        for i in range(1, 6):
            await api.turn(story["id"], f"第{i}问：{line}{line}", f"第{i}答：{line}{line}{line}")
        stories.append(story)
    anchored, plain = [await settled(api, story["id"]) for story in stories]
    assert [r["kind"] for r in anchored.values()].count("compact") == 1  # the block is reserved when turn 5 is written
    assert "compact" not in [r["kind"] for r in plain.values()]
    await api.append(stories[0]["id"], "user", "第6问")
    context = await context_at(api, stories[0]["id"])
    assert reanchor_of(context) is not None and context["tokens"] <= 1500
    assert context["cut_turns"] == 0 and "episode" in {b["what"] for b in context["explain"]}  # summarized, not cut
