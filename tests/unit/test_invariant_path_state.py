"""Invariant 1: story state is a function of the path. Regenerate, branch and checkout are leaf moves."""

from __future__ import annotations

from tests.builders import StoryBuilder, new_renders


def test_context_at_node_is_unchanged_when_other_branches_are_added(story: StoryBuilder) -> None:
    (_, _), (u2, r2), (u3, _) = story.turns(3)
    before = story.context(at=r2)
    story.reply("重新生成的回答。", parent=u3)
    story.turn("另一条路。", "另一个结局。", parent=r2)
    story.annotate(u3, "hide")
    story.user("编辑过的第二句。", parent=story.app.node(u2).parent_id)
    assert story.context(at=r2) == before


def test_context_is_identical_when_switching_back_to_a_leaf(story: StoryBuilder) -> None:
    (_, r1), (u2, r2) = story.turns(2)
    original = story.context()
    story.reply("重新生成。", parent=u2)
    story.turn("分支。", "分支回答。", parent=r1)
    story.checkout(r2)
    assert story.context() == original


def test_context_follows_the_leaf_when_regenerated(story: StoryBuilder) -> None:
    user, _ = story.turn("问。", "旧回答。")
    story.reply("新回答。", parent=user)
    assert story.context().messages[-1].content == "新回答。"


def test_warm_render_cache_gives_the_same_context_as_a_cold_one_after_a_revision(story: StoryBuilder) -> None:
    (_, r1), _ = story.turns(2)
    renders = new_renders()
    story.context(renders=renders)
    story.annotate(r1, "revise", "改写后的回答。", "typo")
    warm = story.context(renders=renders)
    assert any(m.content.startswith("改写后的回答。") for m in warm.messages)
    assert warm == story.context(renders=new_renders())
