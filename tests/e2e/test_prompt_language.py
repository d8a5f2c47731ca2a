"""Prompts in the card's language, end to end: an English card's context carries no Chinese framing and
a Chinese card's none in English — with every layer in it (summaries, the scene, recall, lore)."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from domain.card.anchor import ANCHOR_TEXTS
from domain.texts import EN
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.scene_support import FAST_JOBS, settled
from tests.shared_data import cards_dir

HAN = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
LAYERS = {
    "keep_turns": 2, "pack_turns": 3, "episodes_kept": 1, "min_pack_chars": 0, "fill_window": False,
    "reanchor_turns": 10,  # (the words are turn 10's: a re-anchoring block, and the digest opened by the anchor)
}  # fmt: skip


async def full_context(api: Api, card_id: str, turns: list[tuple[str, str]], words: str, patch: Any) -> dict[str, Any]:
    """A story of the card with summaries, a scene and recall, and its context at `words`."""
    story = await api.call("POST", "/v1/stories", {"card_id": card_id, "settings": {**LAYERS, "recall_k": 5}}, 201)
    for user, reply in turns:
        await api.turn(story["id"], user, reply)
    await settled(api, story["id"])
    await api.call("PATCH", f"/v1/stories/{story['id']}/scene", {"patch": patch})
    await api.append(story["id"], "user", words)
    await api.call("GET", f"/v1/stories/{story['id']}/recall?q=x")  # builds the index a context recalls from
    context: dict[str, Any] = await api.call("GET", f"/v1/stories/{story['id']}/context")
    return context


def framing(texts: object) -> list[str]:
    """The fixed parts of each text (what is around its {placeholders}), at least 4 characters long."""
    out = []
    for f in fields(texts):  # type: ignore[arg-type]
        value = getattr(texts, f.name)
        for text in value.values() if isinstance(value, dict) else [value]:
            out += [part.strip() for part in re.split(r"\{[a-z]+\}", str(text)) if len(part.strip()) >= 4]
    return out


async def test_an_english_cards_context_carries_no_chinese(make_client: MakeClient) -> None:
    api = api_for(await make_client(**FAST_JOBS), TENANT)
    card = await api.send("POST", "/v1/cards/import", (cards_dir() / "default_Seraphina.png").read_bytes())
    turns = [(f"Day {i}: is the forest safe?", f"On day {i} the glade still holds, I promise.") for i in range(1, 10)]
    patch = {"time": "Day 9, dusk", "location": "the glade", "characters": {"Seraphina": {"status": "tired"}}}
    context = await full_context(api, card["id"], turns, "Tell me again what you promised on day 2.", patch)
    kinds = {block["what"] for block in context["explain"]}
    assert {"digest", "episode", "scene", "roster", "lore", "recall", "reanchor"} <= kinds, kinds
    assert context["language"] == "en"
    found = [(i, HAN.findall(m["content"])[:5]) for i, m in enumerate(context["messages"]) if HAN.search(m["content"])]
    assert found == []
    assert context["messages"][1]["content"].startswith("[Story so far]")


async def test_a_chinese_cards_context_carries_no_english_framing(make_client: MakeClient) -> None:
    api = api_for(await make_client(**FAST_JOBS), TENANT)
    book = {"entries": [{"keys": ["灯塔"], "content": "北屿灯塔已熄灭一年。", "comment": "灯塔", "enabled": True}]}
    card = await api.card(character_book=book)
    turns = [(f"第{i}天：灯塔还亮吗？", f"第{i}天，亮着，我答应你。") for i in range(1, 10)]
    patch = {"time": "第九天黄昏", "location": "灯塔", "characters": {"沈砚": {"status": "疲惫"}}}
    context = await full_context(api, card["id"], turns, "你第二天答应过我什么？灯塔呢？", patch)
    kinds = {b["what"] for b in context["explain"]}
    assert {"digest", "episode", "scene", "roster", "lore", "recall", "reanchor"} <= kinds, kinds
    assert context["language"] == "zh"
    text = "\n".join(m["content"] for m in context["messages"])
    assert [part for part in [*framing(EN), *framing(ANCHOR_TEXTS["en"])] if part in text] == []
    assert "【前情提要】" in text and "【世界状态】" in text and "【设定】" in text and "【身份锚点 · 沈砚】" in text


async def test_the_story_setting_chooses_the_language_over_the_cards_text(api: Api) -> None:
    card = await api.card()  # a Chinese card
    story = await api.call("POST", "/v1/stories", {"card_id": card["id"], "settings": {"language": "en"}}, 201)
    await api.append(story["id"], "user", "你好")
    context = await api.call("GET", f"/v1/stories/{story['id']}/context")
    assert context["language"] == "en" and context["messages"][0]["content"].startswith("# You play: ")
