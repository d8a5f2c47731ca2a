"""What a search waits for: a slow query vector is given up for words, and an endpoint is never waited for."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from providers.tokens import EstimatingCounter
from service.recall import Recall
from service.views import StoryViews
from tests.builders import StoryBuilder
from tests.integration.recall_support import TIGHT, everywhere, filler, indexed, recalled


class SlowEmbedder(HashingEmbedder):
    """A local embedder that takes its time over queries (and notes the threads it embeds them on)."""

    instant = False

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "query":
            self.threads.add(threading.current_thread().name)
            time.sleep(1.0)
        return super().encode(texts, purpose)


def test_a_query_vector_that_takes_too_long_leaves_the_recall_to_words_and_the_turn_goes_on(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    slow = Recall(read_models, SlowEmbedder())
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), slow, recall_seconds=0.1)
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    _, treasure = story.turn("地下室里有什么？", "“一箱旧银币宝藏。”")
    filler(story, 20)
    story.user("银币宝藏呢？")
    indexed(runner, slow, story)
    started = time.perf_counter()
    ctx = views.context(story.tenant, story.story_id, None)
    assert time.perf_counter() - started < 0.9 and treasure in recalled(ctx)  # by words
    assert ctx.messages[-1].content.endswith("银币宝藏呢？")
    assert slow.embed_soon("银币宝藏呢？").result(timeout=5) is not None  # the vector comes all the same …
    started = time.perf_counter()
    [hit, *_] = slow.search_within(0.1, story.story_id, "银币宝藏呢？", 3, 10**6, everywhere)
    assert "dense" in hit.found_by and time.perf_counter() - started < 0.9  # … for the next search of the words


@pytest.mark.parametrize("embedder", [None, HashingEmbedder(), SlowEmbedder()])
def test_a_search_runs_on_the_callers_thread_and_only_a_query_to_embed_goes_to_the_query_thread(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels, embedder: HashingEmbedder | None
) -> None:
    """No hop to another thread unless a local embedder has a query to encode: by words alone, or with
    the query's vector known (a slow embedder then prepared ahead, as the context's handler does)."""
    recall = Recall(read_models, embedder, vector_wait=5.0)
    story = StoryBuilder.start(sqlite_changji)
    story.turn("地下室里有什么？", "“一箱旧银币宝藏。”")
    filler(story, 5)
    indexed(runner, recall, story)
    if embedder is not None:
        asyncio.run(recall.prepare(story.story_id, "银币宝藏"))
    threads: set[str] = set()

    def on_path(_node: str) -> bool:
        threads.add(threading.current_thread().name)
        return True

    hits = recall.search_within(5.0, story.story_id, "银币宝藏", 3, 10**6, on_path)
    assert hits and threads == {threading.current_thread().name}
    if isinstance(embedder, SlowEmbedder):  # a query it has not seen is embedded on the query thread, waited for
        threads.clear()
        [hit, *_] = recall.search_within(5.0, story.story_id, "旧银币", 3, 10**6, on_path)
        assert "dense" in hit.found_by and threads == {threading.current_thread().name}
        assert embedder.threads and threading.current_thread().name not in embedder.threads


class RemoteLike(HashingEmbedder):
    """An embedder over the network, as recall sees one: it may fail, and it counts the queries it gets."""

    instant, remote = False, True

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.queries = 0

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "query":
            self.queries += 1
        if self.failing:
            raise ConnectionError("the endpoint is down")
        return super().encode(texts, purpose)


def test_an_endpoint_is_never_waited_for_on_a_search_and_a_failed_build_holds_no_thread(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = RemoteLike()
    recall = Recall(read_models, embedder)
    recall.build_pause = recall.build_rest = 0.0  # builds back to back (the retry delay after a failure stays 30 s)
    story, other = StoryBuilder.start(sqlite_changji), StoryBuilder.start(sqlite_changji)
    _, treasure = story.turn("地下室里有什么？", "“一箱旧银币宝藏。”")
    filler(story, 3)
    other.turns(3)
    runner.catch_up()
    recall.refresh_soon(story.story_id).result(timeout=30)
    [hit, *_] = recall.search(story.story_id, "银币宝藏", 3, 10_000, everywhere)  # not prepared: by words
    assert (
        hit.row["node_id"] == str(treasure) and set(hit.found_by) == {"bm25", "bm25_context"} and embedder.queries == 0
    )
    asyncio.run(recall.prepare(story.story_id, "银币宝藏"))
    [hit, *_] = recall.search(story.story_id, "银币宝藏", 3, 10_000, everywhere)
    assert set(hit.found_by) == {"bm25", "bm25_context", "dense"} and embedder.queries == 1

    embedder.failing = True
    story.turn("灯塔的钥匙呢？", "“挂在门后。”")  # words it has not embedded yet
    runner.catch_up()
    index = recall.refresh_soon(story.story_id).result(timeout=30)
    assert index is not None and not index.complete and index.vectors is None  # words alone for now
    story.turn("钥匙是铜的吗？", "“铜的，生了锈。”")  # while it is failing, a caller that waits …
    runner.catch_up()
    waited = asyncio.run(recall.refresh(story.story_id))
    assert waited is not None and waited.seq == read_models.archive_seq(story.story_id)  # … gets every write
    started = time.perf_counter()
    assert recall.refresh_soon(story.story_id).result(timeout=30) is waited  # no new try before its time…
    assert recall.refresh_soon(other.story_id).result(timeout=30) is not None  # …and no one waits for it
    assert time.perf_counter() - started < 1.0
    asyncio.run(recall.stop())
