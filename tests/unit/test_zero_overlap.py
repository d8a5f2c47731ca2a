"""Invariant 3 (zero overlap) under compaction: over random trees, branch switches, regenerates, hides,
budget cuts and compactions, every context covers each turn of its path exactly once — inside a summary
layer, word for word, hidden (listed), or cut by the budget (reported) — and every summary it uses
annotates a node on its own path (so a branch before a summary never sees it, and every branch through
its node does)."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.values import NodeView
from projections.context.records import Context
from projections.context.window import WindowCache
from tests.builders import StoryBuilder, memory_app, new_renders
from tests.compaction_support import SMALL, compact, compact_if_due

OPS = st.lists(
    st.tuples(
        st.sampled_from(["turn"] * 6 + ["regenerate", "branch", "hide", "unhide", "compact", "checkout"]),
        st.integers(0, 10_000),
        st.integers(1, 80),
    ),
    min_size=1,
    max_size=60,
)

SUMMARY = ("digest", "episode")
WORD_FOR_WORD = ("greeting", "verbatim", "hidden", "user")


def path_of(story: StoryBuilder, leaf: UUID) -> list[NodeView]:
    out = []
    current: UUID | None = leaf
    while current is not None:
        node = story.app.node(current)
        out.append(node)
        current = node.parent_id
    return out[::-1]


def check(story: StoryBuilder, ctx: Context) -> None:
    path = path_of(story, ctx.leaf_id)
    on_path = {n.id for n in path}
    depth_of = {n.id: n.depth for n in path}
    seen: Counter[int] = Counter()
    for block in ctx.explain:
        if block.what in SUMMARY:
            assert block.node_ids[0] in on_path, f"{block.what} from another branch"
            assert block.covers is not None
            seen.update(range(block.covers[0], block.covers[1] + 1))
        elif block.what == "cut":
            assert block.covers is not None
            seen.update(range(block.covers[0], block.covers[1] + 1))
        elif block.what in WORD_FOR_WORD:
            assert set(block.node_ids) <= on_path
            seen.update(depth_of[n] for n in block.node_ids)
    expected = set(range(len(path)))
    missing = expected - set(seen)
    twice = {d for d, n in seen.items() if n > 1}
    assert not missing and not twice and set(seen) <= expected, (missing, twice)
    for block in ctx.explain:  # the path's blocks say which message they are in
        if block.what == "verbatim":
            assert block.message_index is not None
            first = next(n for n in path if n.id == block.node_ids[0])
            assert first.text in ctx.messages[block.message_index].content
        elif block.what == "greeting":
            assert block.message_index is not None and ctx.messages[block.message_index].role == "assistant"
    for block in ctx.explain:  # … and where in it: a client can highlight each block
        if block.what in ("cut", "hidden"):
            assert block.span is None
            continue
        assert block.span is not None and block.message_index is not None and block.end_message is not None
        (start, end), first, last = block.span, block.message_index, block.end_message
        assert 0 <= start <= len(ctx.messages[first].content) and 0 <= end <= len(ctx.messages[last].content)
        if block.what == "verbatim":
            nodes = [next(n for n in path if n.id == node_id) for node_id in block.node_ids]
            assert ctx.messages[first].content[start:].startswith(nodes[0].text), block
            assert ctx.messages[last].content[:end].endswith(nodes[-1].text), block
        else:
            assert first == last and end - start == block.chars, block
        shown = ctx.messages[first].content[start:end]
        node = next((n for n in path if block.node_ids and n.id == block.node_ids[0]), None)
        if block.what == "system":
            assert shown == ctx.messages[0].content
        elif block.what == "greeting" and node is not None and "{{" not in node.text:
            assert shown == node.text
        elif block.what == "episode" and node is not None and node.episode is not None:
            assert shown.endswith(node.episode.text) and "### 第" in shown
        elif block.what == "digest" and node is not None and node.digest is not None:
            assert shown.endswith(node.digest.text())
        if block.what == "user":
            assert ctx.messages[last].content[start:end] == path[-1].text and end == len(ctx.messages[last].content)
    roles = [m.role for m in ctx.messages]
    assert roles[0] == "system" and "system" not in roles[1:]
    assert all(a != b for a, b in pairwise(roles[1:])), roles  # strict providers refuse runs


def apply(story: StoryBuilder, kind: str, choice: int, size: int) -> None:
    app = story.app
    leaf = app.node(story.leaf)
    nodes = path_of(story, leaf.id)
    pick = nodes[choice % len(nodes)]
    text = "风声。" * (size // 3 + 1)
    if kind == "turn":
        parent = leaf.id if leaf.kind != "user" else leaf.parent_id
        user = story.user(f"问：{text}", parent) if leaf.kind != "user" else leaf.id
        reply = story.reply(f"答：{text}", user)
        compact_if_due(app, reply)
    elif kind == "regenerate" and leaf.kind == "reply":
        reply = story.reply(f"另答：{text}", leaf.parent_id)
        compact_if_due(app, reply)
    elif kind == "branch":
        replies = [n for n in nodes if n.kind in ("reply", "greeting")]
        target = replies[choice % len(replies)]
        user = story.user(f"分支：{text}", target.id)
        compact_if_due(app, story.reply(f"分支答：{text}", user))
    elif kind == "hide" and pick.kind != "greeting":
        story.annotate(pick.id, "hide")
    elif kind == "unhide":
        story.annotate(pick.id, "unhide")
    elif kind == "compact":
        compact(app, leaf.id, manual=True)
    elif kind == "checkout":
        story.checkout(pick.id)


@settings(max_examples=120, deadline=None)
@given(OPS, st.sampled_from([32768, 900, 600]))
def test_every_turn_of_the_path_is_covered_exactly_once(ops: list[tuple[str, int, int]], window: int) -> None:
    story = StoryBuilder.start(memory_app(), **SMALL, context_window=window, reply_reserve=100)
    renders, windows = new_renders(), WindowCache()  # as the service keeps them, across every turn
    for kind, choice, size in ops:
        apply(story, kind, choice, size)
        fresh = story.context()
        check(story, fresh)
        cached = story.context(renders=renders, windows=windows)
        check(story, cached)
        assert cached.messages == fresh.messages  # caches change the cost, never the context


def test_a_summary_serves_every_branch_through_its_node_and_none_before_it() -> None:
    story = StoryBuilder.start(memory_app(), **SMALL, fill_window=False)  # the summaries, never unfolded
    turns = [story.turn(f"第{i}问，灯还亮着吗？", f"第{i}答，亮着。") for i in range(1, 6)]
    assert compact_if_due(story.app, turns[-1][1]) is not None  # five turns: keep 2 + pack 3
    episode_end = turns[2][1]
    assert story.app.node(episode_end).episode is not None

    def summarized(ctx: Context) -> list[UUID]:
        return [b.node_ids[0] for b in ctx.explain if b.what in SUMMARY]

    story.reply("重新生成的第五答。", turns[-1][0])  # a regenerate below the episode's node
    assert summarized(story.context()) == [episode_end]
    story.user("从第三答岔开。", episode_end)  # a branch right at the episode's node
    assert summarized(story.context()) == [episode_end]
    story.user("从第二答岔开。", turns[1][1])  # a branch before it: word for word again
    ctx = story.context()
    assert summarized(ctx) == [] and "【前情提要】" not in ctx.messages[1].content
    check(story, ctx)


def test_a_compacted_path_that_fits_its_budget_is_word_for_word_again_and_a_tight_one_keeps_its_summaries() -> None:
    def played(**settings: object) -> StoryBuilder:
        story = StoryBuilder.start(memory_app(), **{**SMALL, **settings})
        for i in range(1, 12):
            story.turn(f"第{i}问，灯还亮着吗？" + "雨" * 150, f"第{i}答，亮着。" + "风" * 150)
            compact_if_due(story.app, story.leaf)
        assert story.app.node(story.leaf).depth == 22
        return story

    roomy = played()
    ctx = roomy.context()
    check(roomy, ctx)
    assert not [b for b in ctx.explain if b.what in SUMMARY]  # every turn fits: no summary stands in
    assert sum(len(b.node_ids) for b in ctx.explain if b.what in WORD_FOR_WORD) == 22 + 1
    tight = played(context_window=1800, reply_reserve=100, episodes_kept=10)  # episodes only: half the turns' size
    ctx = tight.context()
    check(tight, ctx)
    kinds = [b.what for b in ctx.explain]
    assert "cut" not in kinds and "episode" in kinds
    shown = sum(len(b.node_ids) for b in ctx.explain if b.what == "verbatim")
    assert shown > 2 * SMALL["keep_turns"]  # more than keep_turns, as far as the budget allows


def test_a_digest_gives_way_to_the_episodes_it_absorbed_when_the_budget_has_room_for_them() -> None:
    story = StoryBuilder.start(
        memory_app(), **{**SMALL, "episodes_kept": 0, "context_window": 2100, "reply_reserve": 100}
    )
    for i in range(1, 12):
        story.turn(f"第{i}问，灯还亮着吗？" + "雨" * 150, f"第{i}答，亮着。" + "风" * 150)
        compact_if_due(story.app, story.leaf)
    assert any(story.app.node(n.id).digest for n in path_of(story, story.leaf))
    ctx = story.context()
    check(story, ctx)
    kinds = [b.what for b in ctx.explain]
    assert "digest" not in kinds and "episode" in kinds and "cut" not in kinds
