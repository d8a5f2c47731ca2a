"""The 【剧情记忆】 block with long turns: a passage of one brings the whole turn where it fits (once, whichever
of its passages came), the part marked where it does not, and an episode ending on that turn's reply
takes nothing from it."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from domain.texts import CONTEXT_TEXTS
from projections.context.recall import recall_block
from projections.recall.story_index import Hit

ZH = CONTEXT_TEXTS["zh"]


REPLY, USER, OTHER = str(uuid4()), str(uuid4()), str(uuid4())


def row(part: int, text: str, user_part: int = 0, kind: str = "turn", node: str = REPLY) -> dict[str, Any]:
    return {
        "id": f"{node}:{part}", "node_id": node, "user_id": USER, "depth": 4, "turn": 2, "first_turn": 1,
        "text": text, "user_part": user_part, "user_hidden": 0, "reply_hidden": 0, "seq": 1, "kind": kind,
    }  # fmt: skip


WHOLE = row(0, "灯塔的事？那一夜雾很大。守塔人划船送药。", user_part=5)
FIRST, SECOND = row(0, "灯塔的事？那一夜雾很大。", user_part=5), row(1, "守塔人划船送药。")


def block(hits: list[Hit], budget: int) -> str | None:
    made = recall_block(hits, "沈砚", "林舟", budget, len, lambda text, c, u: text, ZH)
    return made.text if made is not None else None


def test_a_long_turn_comes_whole_once_or_as_its_marked_part() -> None:
    second, first = Hit(SECOND, 0.9, {}, WHOLE), Hit(FIRST, 0.5, {}, WHOLE)
    text = block([second, first], 500)
    assert text is not None and text.count("守塔人划船送药") == 1 and "那一夜雾很大" in text and "…" not in text
    text = block([second, first], 60)
    assert text is not None and "…" in text and "守塔人划船送药" in text and "那一夜雾很大" not in text


def test_an_episode_ending_on_a_long_turn_does_not_hide_it() -> None:
    episode = Hit(row(0, "第1–2轮：雾夜送药。", kind="episode"), 0.9, {})
    text = block([episode, Hit(SECOND, 0.8, {}, WHOLE)], 500)
    assert text is not None and "雾夜送药" in text and "守塔人划船送药" in text and "那一夜雾很大" in text
