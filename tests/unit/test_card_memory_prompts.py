"""The side model's card-memory answers are checked before anything of them is kept: a recap needs its
five sections and a plot; a merge needs a handbook that parses against the card's stories, a resident
summary under its heading (not a sub-heading) within its size, and a handbook within its cap."""

from __future__ import annotations

from uuid import uuid4

import pytest

from domain.memory.handbook import MemoryTextError, Tags
from service.card_memory_prompts import checked_recap, parsed_merge

A = uuid4()
TAGS = Tags([A])
TAG = f"[局:{TAGS.short[A]}]"
RECAP = "# 灯塔\n\n## 剧情脉络\n灯还亮着。\n\n## 人物与关系\n无\n\n## 既定事实\n- 油快用完了\n\n## 未了之事\n无\n\n## 用户的玩法偏好\n无\n"


def test_a_recap_needs_every_section_and_a_plot() -> None:
    assert checked_recap(RECAP, "zh") == RECAP
    assert checked_recap(RECAP.replace("## 未了之事\n无\n\n", ""), "zh") is None
    assert checked_recap(RECAP.replace("灯还亮着。", ""), "zh") is None
    assert checked_recap(None, "zh") is None
    english = "# Lamp\n\n" + "\n\n".join(
        f"## {name}\nnone" for name in ("Characters and relationships", "Established facts", "Open threads")
    )
    assert checked_recap(english + "\n\n## Plot\nThe lamp burns.\n\n## The user's play preferences\nnone", "en")


def merge(resident: str, items: str = f"- 油快用完了 {TAG}", heading: str = "# 常驻摘要") -> str:
    return f"# 局：灯塔（{TAGS.short[A]}）\n灯还亮着。\n\n# 世界既定事实（跨局）\n{items}\n\n{heading}\n{resident}"


def test_a_merge_answer_is_read_or_refused_whole() -> None:
    handbook, resident = parsed_merge(merge("沈砚守着灯塔。"), TAGS, "zh")
    assert (
        handbook.stories == {A} and [i.text for i in handbook.items] == ["油快用完了"] and resident == "沈砚守着灯塔。"
    )
    for bad in (
        merge("沈砚守着灯塔。", heading="## 常驻摘要"),  # (a sub-heading is not the resident summary's)
        merge(""),
        merge("灯" * 1400),
        merge("沈砚。", items="- 编造的 [局:deadbeef]"),
        merge("沈砚。", items="\n".join(f"- 第{i}条：" + "灯塔" * 40 + f" {TAG}" for i in range(200))),
    ):
        with pytest.raises(MemoryTextError):
            parsed_merge(bad, TAGS, "zh")
    with pytest.raises(MemoryTextError):
        parsed_merge(None, TAGS, "zh")
