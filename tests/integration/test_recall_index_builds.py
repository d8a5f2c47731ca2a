"""Building a story's recall index: each passage from its own path, rests between builds, step by step as at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Literal
from uuid import UUID

import numpy as np
import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.recall.story_index import StoryIndex
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from service.recall import Recall
from tests.builders import StoryBuilder
from tests.integration.recall_support import TIGHT, CountingEmbedder, indexed


def test_each_passage_is_embedded_after_the_end_of_the_turn_before_it_on_its_path(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    story = StoryBuilder.start(sqlite_changji)
    _, fork = story.turn("钥匙放哪了？", "“在旧靴子里。”")
    story.turn("那靴子呢？", "“在床底下。”")
    story.turn("靴子还在吗？", "“被狗叼走了。”", parent=fork)
    embedder = CountingEmbedder()
    recall = Recall(read_models, embedder)
    indexed(runner, recall, story)
    assert sorted(embedder.texts) == sorted(
        [
            "钥匙放哪了？\n“在旧靴子里。”",
            "钥匙放哪了？\n“在旧靴子里。”\n那靴子呢？\n“在床底下。”",
            "钥匙放哪了？\n“在旧靴子里。”\n靴子还在吗？\n“被狗叼走了。”",  # its own path, not the other branch
        ]
    )


@pytest.mark.parametrize("rest", [0.0, 1e6])
def test_a_build_rests_in_proportion_to_how_long_it_took(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels, rest: float
) -> None:
    """Rebuilding costs time in proportion to the archive: after a build of d seconds the story's index
    is not built again for `build_rest` × d (a long story that keeps moving does not keep a core busy)."""
    recall = Recall(read_models, None)
    recall.build_pause, recall.build_rest = 0.0, rest
    story = StoryBuilder.start(sqlite_changji)
    story.turns(3)
    runner.catch_up()
    first = recall.refresh_soon(story.story_id).result(timeout=30)
    story.turns(2)
    runner.catch_up()
    second = recall.refresh_soon(story.story_id).result(timeout=30)
    assert first is not None and second is not None
    if rest:
        assert second is first and recall.state(story.story_id).index_seq < read_models.archive_seq(story.story_id)
    else:
        assert second.seq == read_models.archive_seq(story.story_id) > first.seq
    waited = asyncio.run(recall.refresh(story.story_id))  # a caller that waits gets every write, rest or not
    assert waited is not None and waited.seq == read_models.archive_seq(story.story_id)
    recall.forget(story.story_id)  # … and so does a story whose index went (evicted, deleted and restored)
    story.turns(1)
    runner.catch_up()
    rebuilt = recall.refresh_soon(story.story_id).result(timeout=30)
    assert rebuilt is not None and rebuilt.seq == read_models.archive_seq(story.story_id)


def test_an_index_built_step_by_step_holds_what_one_built_at_once_holds(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    stepwise = Recall(read_models, HashingEmbedder())
    stepwise.build_pause = stepwise.build_rest = 0.0
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    replies = []
    for i in range(12):  # builds between turns, a revision, a hidden turn and a branch among them
        _, reply = story.turn(f"第{i}天去了哪里？", f"“第{i}天去了{'码头' if i % 3 else '山顶的灯塔'}。”")
        replies.append(reply)
        if i == 3:  # a reply of several passages, revised later to one
            _, long = story.turn(
                "讲讲那座灯塔。",
                "。".join(f"“灯塔的第{n}层放着旧铜灯和一箱航海日志，墙上挂着褪色的海图" for n in range(40)),
            )
            replies.append(long)
        if i == 5:
            story.annotate(replies[2], "revise", "“第2天去了旧仓库，找那盏铜灯。”", "rewrite")
            story.annotate(replies[4], "revise", "“灯塔好好的。”", "rewrite")
        if i == 7:
            story.annotate(replies[5], "hide")
        if i == 9:
            story.turn("另一条路？", "“去了渔村。”", parent=replies[9])
            story.checkout(replies[10])
        runner.catch_up()
        stepwise.refresh_soon(story.story_id, now=True).result(timeout=30)
    once = Recall(read_models, HashingEmbedder())
    built, whole = stepwise.refresh_soon(story.story_id, now=True).result(timeout=30), once.refresh_soon(story.story_id).result(timeout=30)  # fmt: skip
    assert built is not None and whole is not None
    assert [r["id"] for r in built.rows] == [r["id"] for r in whole.rows] and built.rows == whole.rows
    for query in ("山顶的灯塔", "铜灯 旧仓库", "航海日志", "渔村", "第4天"):
        on_path = lambda node_id: True  # noqa: E731
        vector = HashingEmbedder().encode([query], "query")[0]
        got = built.search(query, vector, 5, 10_000, on_path)
        want = whole.search(query, vector, 5, 10_000, on_path)
        assert [(h.row["id"], h.score, h.found_by) for h in got] == [(h.row["id"], h.score, h.found_by) for h in want]


class GatedEmbedder(HashingEmbedder):
    """A local embedder whose passages wait at a gate (a build held under way)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.gate = threading.Event(), threading.Event()

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "passage":
            self.entered.set()
            assert self.gate.wait(30)
        return super().encode(texts, purpose)


class WatchedRecall(Recall):
    """Recall that says when a caller asked for an index it waits on."""

    def __init__(self, store: ReadModels, embedder: HashingEmbedder) -> None:
        super().__init__(store, embedder)
        self.asked = threading.Event()

    def refresh_soon(self, story_id: UUID, now: bool = False) -> Future[StoryIndex | None]:
        future = super().refresh_soon(story_id, now)
        if now:
            self.asked.set()
        return future


def test_a_refresh_that_joins_a_build_begun_before_the_story_was_forgotten_builds_again(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    """Deleted while its index was being built, then restored: the build under way keeps nothing, and a
    search asked for after the restore waits for one that does."""
    embedder = GatedEmbedder()
    recall = WatchedRecall(read_models, embedder)
    story = StoryBuilder.start(sqlite_changji)
    story.turns(3)
    runner.catch_up()
    under_way = recall.refresh_soon(story.story_id)
    assert embedder.entered.wait(30)
    recall.forget(story.story_id)  # (the story deleted, and restored: its events and archive stand)

    async def refreshed() -> StoryIndex | None:
        asking = asyncio.create_task(recall.refresh(story.story_id))
        while not recall.asked.is_set():  # it joined the build under way …
            await asyncio.sleep(0.01)
        embedder.gate.set()  # … which then ends, keeping nothing
        return await asking

    index = asyncio.run(refreshed())
    assert under_way.result(timeout=30) is None
    assert index is not None and len(index.rows) == 3
    assert recall.index(story.story_id) is index
