"""Invariant 5: assembling the next context loads O(window) nodes, whatever the story's length."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from domain.application import Changji
from tests.builders import CountingLoad, StoryBuilder, memory_app, sqlite_app

SMALL_WINDOW = {"context_window": 1024, "reply_reserve": 0}


def a_story_of(app: Changji, turns: int, **settings: int) -> StoryBuilder:
    story = StoryBuilder.start(app, **SMALL_WINDOW, **settings)
    story.turns(turns, user="第{i}句：风越来越大了，灯塔的灯还亮着吗？", reply="第{i}答：还亮着，沈砚一夜没睡。")
    return story


def nodes_loaded(story: StoryBuilder) -> tuple[int, int]:
    """(nodes loaded to assemble the context at the leaf, nodes the context kept word for word)."""
    load = CountingLoad(story.app.node)
    ctx = story.context(load=load, summarized=False)  # as the service says of a story never compacted
    kept = sum(len(b.node_ids) for b in ctx.explain if b.what in ("greeting", "verbatim", "user", "hidden"))
    return load.calls, kept


def test_context_loads_the_same_number_of_nodes_when_the_story_is_ten_times_longer() -> None:
    short, _ = nodes_loaded(a_story_of(memory_app(), 200))
    long, kept = nodes_loaded(a_story_of(memory_app(), 2000))
    assert short == long
    assert kept < long <= kept + 2  # the window, plus the one turn that did not fit


def test_cold_start_loads_only_the_window_when_assembling_a_context(events_path: Path) -> None:
    turns = 2000
    warm = a_story_of(sqlite_app(events_path), turns)
    warm_loads, kept = nodes_loaded(warm)
    cold_loads, _ = nodes_loaded(replace(warm, app=sqlite_app(events_path)))
    assert cold_loads == warm_loads <= kept + 2
    assert cold_loads < (2 * turns + 1) // 10  # a tenth of the story's nodes, at most
