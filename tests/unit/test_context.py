"""Context v1: system prompt, greeting, verbatim path, hidden nodes, instructions, macros, budget cut."""

from __future__ import annotations

import pytest

from domain.application import Changji
from domain.tree.rules.paths import project_path
from projections.context.records import Context
from tests.builders import StoryBuilder, a_card


def blocks(ctx: Context, what: str) -> list[tuple[object, ...]]:
    return [b.node_ids for b in ctx.explain if b.what == what]


@pytest.fixture
def lighthouse(app: Changji) -> StoryBuilder:
    card = a_card(post_history_instructions="保持克制，不超过三段。", system_prompt="不替{{user}}说话。")
    return StoryBuilder.start(app, card, user_name="林舟")


def test_system_prompt_is_byte_stable_across_turns(lighthouse: StoryBuilder) -> None:
    first = lighthouse.context().messages[0]
    lighthouse.turns(3)
    later = lighthouse.context().messages[0]
    assert (first.role, first.content.encode()) == ("system", later.content.encode())


def test_context_starts_with_the_greeting_after_the_system_prompt(lighthouse: StoryBuilder) -> None:
    lighthouse.turns(2)
    ctx = lighthouse.context()
    assert ctx.messages[1].role == "assistant"
    assert ctx.messages[1].content == "门被风撞开。“林舟，渡船三天后才到。”"
    assert blocks(ctx, "greeting") == [(lighthouse.root_id,)]


def test_context_fills_char_and_user_macros(lighthouse: StoryBuilder) -> None:
    lighthouse.turn("<BOT>，我是{{user}}。", "{{char}}点了点头。")
    text = "\n".join(m.content for m in lighthouse.context().messages)
    assert "{{" not in text and "<BOT>" not in text
    assert "沈砚，我是林舟。" in text and "沈砚点了点头。" in text and "不替林舟说话。" in text


def test_context_leaves_hidden_nodes_out_and_explains_them(lighthouse: StoryBuilder) -> None:
    (_, r1), _ = lighthouse.turns(2, user="秘密{i}", reply="回答{i}")
    lighthouse.annotate(r1, "hide")
    ctx = lighthouse.context()
    assert all("回答1" not in m.content for m in ctx.messages)
    assert any("秘密1" in m.content for m in ctx.messages)
    assert blocks(ctx, "hidden") == [(r1,)]


def test_context_puts_instructions_then_the_users_words_last_when_leaf_is_user(lighthouse: StoryBuilder) -> None:
    lighthouse.turns(2)
    lighthouse.user("最后一句话。")
    ctx = lighthouse.context()
    last = ctx.messages[-1]
    assert last.role == "user"
    assert last.content == "【卡作者末端指令】保持克制，不超过三段。\n\n最后一句话。"
    assert [b.what for b in ctx.explain][-2:] == ["instructions", "user"]
    assert {b.message_index for b in ctx.explain[-2:]} == {len(ctx.messages) - 1}


def test_context_ends_with_the_reply_when_leaf_is_a_reply(lighthouse: StoryBuilder) -> None:
    lighthouse.turn("问。", "答。")
    assert lighthouse.context().messages[-1].content == "答。"


def test_context_tokens_are_the_sum_of_its_explain_blocks(lighthouse: StoryBuilder) -> None:
    (_, r1), _ = lighthouse.turns(2)
    lighthouse.annotate(r1, "hide")
    lighthouse.user("还有一件事。")
    ctx = lighthouse.context()
    assert ctx.tokens == sum(b.tokens for b in ctx.explain)


def long_story(app: Changji, turns: int) -> StoryBuilder:
    story = StoryBuilder.start(app, context_window=512, reply_reserve=0)
    story.turns(turns, user="第{i}句：风越来越大了，灯塔的灯还亮着吗？", reply="第{i}答：还亮着，沈砚一夜没睡。")
    return story


def test_budget_cut_drops_the_oldest_whole_turns_and_says_so(app: Changji) -> None:
    story = long_story(app, 40)
    ctx = story.context()
    assert ctx.cut_turns > 0
    assert len(blocks(ctx, "cut")) == 1
    assert ctx.tokens <= ctx.budget


def test_budget_cut_keeps_every_turn_contiguous_up_to_the_leaf(app: Changji) -> None:
    story = long_story(app, 40)
    ctx = story.context()
    (kept,) = blocks(ctx, "verbatim")
    turns = [story.app.node(n).turn for n in kept]
    assert turns == [t for t in range(ctx.cut_turns + 1, 41) for _ in range(2)]
    assert kept[-1] == story.leaf


def test_context_has_no_cut_when_the_story_fits(lighthouse: StoryBuilder) -> None:
    lighthouse.turns(3)
    ctx = lighthouse.context()
    assert (ctx.cut_turns, blocks(ctx, "cut")) == (0, [])
    (kept,) = blocks(ctx, "verbatim")
    assert len(kept) == 6


def path_ids(story: StoryBuilder) -> list[object]:
    return [n.id for n in project_path(story.app.node, story.leaf)]


def test_context_explains_every_path_node_exactly_once(lighthouse: StoryBuilder) -> None:
    (u1, _), (_, r2) = lighthouse.turns(2)
    lighthouse.annotate(u1, "hide")
    lighthouse.annotate(r2, "hide")
    lighthouse.user("最后一句话。")
    ctx = lighthouse.context()
    explained = [n for b in ctx.explain for n in b.node_ids]
    assert sorted(explained, key=str) == sorted(path_ids(lighthouse), key=str)
    assert len(explained) == len(set(explained))


def test_budget_cut_explains_only_the_kept_nodes(app: Changji) -> None:
    story = long_story(app, 40)
    ctx = story.context()
    explained = [n for b in ctx.explain if b.what != "cut" for n in b.node_ids]
    assert explained == path_ids(story)[-len(explained) :]


def test_cut_counts_and_the_cut_block_agree_when_only_the_greeting_is_cut(app: Changji) -> None:
    story = StoryBuilder.start(app, a_card(first_mes="长" * 1000), context_window=512, reply_reserve=0)
    story.turn("问。", "答。")
    ctx = story.context()
    assert blocks(ctx, "cut") and (ctx.cut_turns, ctx.cut_nodes) == (0, 1)
