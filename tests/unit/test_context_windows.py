"""Contexts built by extending a cached ancestor's window equal contexts built by walking the path."""

from __future__ import annotations

from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.tree.rules.paths import walk_up
from projections.context.assemble import assemble_context
from projections.context.window import RenderCache, WindowCache
from providers.tokens import EstimatingCounter
from tests.builders import StoryBuilder, a_card, memory_app
from tests.compaction_support import compact

# an operation: (kind, choice, size) — kind picks what happens, choice picks a node, size the text length
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["turn", "turn", "turn", "regenerate", "branch", "hide", "unhide", "revise", "checkout", "compact"]
        ),
        st.integers(0, 10_000),
        st.integers(1, 120),
    ),
    min_size=1,
    max_size=40,
)


def _windowed(story: StoryBuilder, at: UUID, windows: WindowCache, renders: RenderCache):
    app = story.app
    model = app.story(story.tenant, story.story_id)
    card, settings_ = app.card_of(model).data, app.settings(model)
    epoch = app.render_epoch(story.story_id)
    return assemble_context(
        card, settings_, walk_up(app.node, at), renders, windows, epoch, load=app.node,
        recorded=app.summarized(story.story_id),
    )  # fmt: skip


def _apply(story: StoryBuilder, nodes: list[UUID], kind: str, choice: int, size: int) -> None:
    text = "风" * (size * 3)
    pick = nodes[choice % len(nodes)] if nodes else story.root_id
    view = story.app.node(pick)
    if kind == "turn":
        if story.app.node(story.leaf).kind == "user":
            nodes.append(story.reply(f"先答{text}"))
        nodes.extend(story.turn(f"问{text}", f"答{text}"))
    elif kind == "regenerate" and view.kind == "user":
        nodes.append(story.reply(f"又答{text}", pick))
    elif kind == "branch" and view.kind in ("reply", "greeting"):
        nodes.append(story.user(f"另问{text}", pick))
    elif kind in ("hide", "unhide"):
        story.annotate(pick, kind)
    elif kind == "revise" and view.kind == "reply":
        story.annotate(pick, "revise", f"改{text}", "")
    elif kind == "checkout":
        story.checkout(pick)
    elif kind == "compact":
        compact(story.app, story.leaf, manual=True)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, window=st.sampled_from([512, 700, 2000]))
def test_windowed_context_equals_a_full_walk_after_any_history(ops: list[tuple[str, int, int]], window: int) -> None:
    story = StoryBuilder.start(
        memory_app(), a_card(post_history_instructions="保持克制"), context_window=window, reply_reserve=0, keep_turns=2
    )
    windows, renders, nodes = WindowCache(), RenderCache(EstimatingCounter()), []
    for kind, choice, size in ops:
        _apply(story, nodes, kind, choice, size)
        for at in {story.leaf, *nodes[-3:]}:
            assert _windowed(story, at, windows, renders) == story.context(at=at)


def test_window_cache_extends_the_parent_window_instead_of_walking_the_path() -> None:
    story = StoryBuilder.start(memory_app(), context_window=100_000, reply_reserve=0)
    story.turns(50)
    windows, renders = WindowCache(), RenderCache(EstimatingCounter())
    _windowed(story, story.leaf, windows, renders)
    story.turn("新的问题", "新的回答")
    loads: list[UUID] = []

    def counting(node_id: UUID):
        loads.append(node_id)
        return story.app.node(node_id)

    model = story.app.story(story.tenant, story.story_id)
    card, settings_ = story.app.card_of(model).data, story.app.settings(model)
    ctx = assemble_context(
        card, settings_, walk_up(counting, story.leaf), renders, windows, story.app.render_epoch(story.story_id)
    )
    assert len(loads) == 3  # the new reply, the new user node, and the cached leaf above them
    assert ctx == story.context()


def test_hiding_a_node_makes_cached_windows_start_over() -> None:
    story = StoryBuilder.start(memory_app(), context_window=100_000, reply_reserve=0)
    (_, reply), _ = story.turns(2)
    windows, renders = WindowCache(), RenderCache(EstimatingCounter())
    before = _windowed(story, story.leaf, windows, renders)
    story.annotate(reply, "hide")
    after = _windowed(story, story.leaf, windows, renders)
    assert after != before
    assert after == story.context()


class CountingCounter:
    """A token counter that remembers how many texts it was asked about."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text)


def test_render_cache_keeps_each_storys_renders_when_stories_with_other_names_interleave() -> None:
    app = memory_app()
    first = StoryBuilder.start(app, a_card(name="沈砚"))
    second = StoryBuilder.start(app, a_card(name="林舟"))
    first.turns(3)
    second.turns(3)
    counter = CountingCounter()
    renders = RenderCache(counter)
    first_views = [app.node(n) for pair in first.turns(2) for n in pair]
    second_views = [app.node(n) for pair in second.turns(2) for n in pair]
    for views, name in ((first_views, "沈砚"), (second_views, "林舟"), (first_views, "沈砚")):
        for view in views:
            renders.render(view, name, "旅人")
    assert counter.calls == len(first_views) + len(second_views)
