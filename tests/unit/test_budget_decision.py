"""The test a reply's write makes before it announces a compaction (reason budget): turns are left out
of the context at the reply, or would be once the next turn's recall takes its share. It must decide
as the context without `fill_window` would (summarized turns shown again only take room that is left),
over random histories with compactions, and never because a filled window is close to its budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.tree.rules.paths import walk_up
from projections.context.assemble import assemble_context, leaves_turns_out
from projections.context.window import WindowCache
from tests.builders import StoryBuilder, a_card, memory_app, new_renders
from tests.compaction_support import SMALL, compact
from tests.unit.test_zero_overlap import OPS, apply


def decide(story: StoryBuilder, reserve: int, windows: WindowCache | None = None) -> tuple[bool, bool, bool]:
    """(the write's test, the same asked of the context without fill_window, and of the filled one)."""
    app = story.app
    model = app.story(story.tenant, story.story_id)
    card, chosen = app.card_of(model).data, app.settings(model)
    epoch, leaf = app.render_epoch(story.story_id), story.leaf
    renders = new_renders()
    decided = leaves_turns_out(
        card, chosen, walk_up(app.node, leaf), renders, windows, epoch, app.node, True, reserve,
        app.summarized(story.story_id),
    )  # fmt: skip

    def over(fill: bool) -> bool:
        ctx = assemble_context(
            card, chosen.model_copy(update={"fill_window": fill}), walk_up(app.node, leaf), new_renders(), None, epoch, None,
            app.node,
        )  # fmt: skip
        return ctx.cut_turns > 0 or ctx.tokens + reserve > ctx.budget

    return decided, over(False), over(True)


@settings(max_examples=100, deadline=None)
@given(OPS, st.sampled_from([32768, 900, 600]), st.sampled_from([0, 150]))
def test_the_write_decides_as_the_context_without_the_fill(
    ops: list[tuple[str, int, int]], window: int, reserve: int
) -> None:
    story = StoryBuilder.start(memory_app(), **{**SMALL, "fill_window": True}, context_window=window, reply_reserve=100)
    windows = WindowCache()  # kept across the history, as the service keeps it
    for kind, choice, size in ops:
        apply(story, kind, choice, size)
        if story.app.node(story.leaf).kind != "reply":
            continue
        decided, unfilled, _ = decide(story, reserve, windows)
        assert decided == unfilled


def test_a_compacted_story_filled_to_its_budget_announces_nothing() -> None:
    story = StoryBuilder.start(memory_app(), **SMALL, context_window=1000, reply_reserve=0)
    for i in range(1, 13):
        story.turn(f"第{i}问：灯还亮着吗？渡船什么时候来？" * 3, f"第{i}答：亮着，渡船第{i}天会来，风从北边来。" * 3)
    compact(story.app, story.leaf, manual=True)
    decided, unfilled, filled = decide(story, reserve=300)
    assert filled and not unfilled  # the filled context is close to its budget; nothing is left out
    assert not decided


def test_a_greeting_longer_than_the_budget_is_decided_as_the_context_does() -> None:
    story = StoryBuilder.start(
        memory_app(), a_card(first_mes="风" * 3000), **SMALL, context_window=600, reply_reserve=0
    )
    story.turn("第1问", "第1答")
    decided, unfilled, _ = decide(story, reserve=0)
    assert decided == unfilled
