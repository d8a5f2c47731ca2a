"""The card memory's resident summary in a context: it takes its room before the window fills with turns
shown again word for word (a context that left nothing out without it leaves nothing out with it, where
it fits), it is cut and left out by the shared room's rule, and the roles still alternate."""

from __future__ import annotations

import itertools

import pytest

from domain.tree.rules.paths import walk_up
from projections.context.assemble import assemble_context
from projections.context.records import Context
from projections.context.resident import Resident
from tests.builders import StoryBuilder, memory_app, new_renders
from tests.compaction_support import SMALL, compact_if_due

RESIDENT = Resident("沈砚记得：" + "北屿灯塔的油快用完了，老周说下个月换新油。\n\n" * 20, 7)


def context(story: StoryBuilder, resident: Resident | None) -> Context:
    st = story.app.story(story.tenant, story.story_id)
    return assemble_context(
        story.app.card_of(st).data, story.app.settings(st), walk_up(story.app.node, story.leaf), new_renders(), None,
        story.app.render_epoch(story.story_id), load=story.app.node, recorded=story.app.summarized(story.story_id),
        resident=resident,
    )  # fmt: skip


@pytest.mark.parametrize("window", [1800, 2500, 3000, 4000])
def test_the_resident_summary_takes_its_room_before_summarized_turns_are_shown_again(window: int) -> None:
    story = StoryBuilder.start(memory_app(), **{**SMALL, "context_window": window, "reply_reserve": 100})
    for i in range(1, 12):
        story.turn(f"第{i}问，灯还亮着吗？" + "雨" * 150, f"第{i}答，亮着。" + "风" * 150)
        compact_if_due(story.app, story.leaf)
    story.user("还亮着吗？")
    plain, carried = context(story, None), context(story, RESIDENT)
    kinds = [b.what for b in carried.explain]
    if plain.cut_turns == 0:
        assert carried.cut_turns == 0 and "cut" not in kinds, kinds
    assert carried.tokens <= carried.budget
    if "resident" in kinds:
        (block,) = [b for b in carried.explain if b.what == "resident"]
        if block.message_index is not None:
            start, end = block.span or (0, 0)
            assert "油快用完了" in carried.messages[1].content[start:end] and block.version == 7
    roles = [m.role for m in carried.messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
