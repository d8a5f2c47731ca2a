"""Recall over a card's memory: handbook items with their stories (an item only forgotten stories support
left out before the merge that takes it out lands), recap lines with their story, long lines cut."""

from __future__ import annotations

from uuid import uuid4

from domain.memory.handbook import Handbook, Item
from projections.recall.card_memory_index import LINE_CHARS, CardMemoryIndex, memory_passages

A, B = uuid4(), uuid4()
RECAP = (
    "# 灯塔\n\n## 剧情脉络\n- 守塔人老周下个月换新油。\n\n## 人物与关系\n无\n\n## 既定事实\n- " + "旧伞挂在门后。" * 80
)


def test_items_and_recap_lines_are_found_with_their_stories_and_forgotten_ones_are_not() -> None:
    handbook = Handbook((), (Item("facts", "渡船三天后才来", (A, B)), Item("facts", "灯塔的钥匙在钉子上", (B,))))
    passages = memory_passages(handbook, {A: RECAP}, forgotten={B})
    assert [p.text for p in passages if p.kind == "item"] == ["渡船三天后才来"]
    assert [p.sources for p in passages if p.kind == "item"] == [(A,)]  # (the forgotten story's tag left out)
    lines = [p for p in passages if p.kind == "recap"]
    assert lines[0].text == "守塔人老周下个月换新油。" and lines[0].sources == (A,)
    assert all(len(p.text) <= LINE_CHARS for p in lines) and len(lines) > 2  # (the long line cut in parts)
    assert "无" not in [p.text for p in lines]
    hits = CardMemoryIndex(passages).search("老周什么时候换新油？", 3)
    assert hits and hits[0].passage.text == "守塔人老周下个月换新油。"
    assert CardMemoryIndex([]).search("老周", 3) == []
