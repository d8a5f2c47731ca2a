"""Recall over a story's archive, as the context and the recall query see it: only passages on the path
and outside the verbatim window, hidden ones included and marked, a revised reply by its new text, an
abandoned branch never; a rebuilt index answers as the live one; a slow recall is given up."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Literal
from uuid import UUID

import numpy as np
import pytest

from api.bootstrap import bootstrap
from api.settings import ModelSettings, Settings
from domain.application import Changji
from projections.context.records import Context
from projections.read_models.store import ReadModels
from projections.recall.story_index import StoryIndex
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from providers.tokens import EstimatingCounter
from service.recall import Recall
from service.views import StoryViews
from storage.embedding_cache import EmbeddingCache
from tests.builders import StoryBuilder

TIGHT = {"context_window": 600, "reply_reserve": 150, "pack_turns": 0, "recall_tokens": 150, "keep_turns": 1}
FILLER = (
    "今天也在修灯塔的窗户，玻璃上全是盐霜，擦了一遍又一遍还是看不清外面的海。",
    "“窗框又松了，风一吹就响，明天得找几颗新钉子来，顺便把门轴也上点油。”",
)


@pytest.fixture
def recall(read_models: ReadModels) -> Recall:
    return Recall(read_models, HashingEmbedder())


@pytest.fixture
def views(sqlite_changji: Changji, read_models: ReadModels, recall: Recall) -> StoryViews:
    return StoryViews(sqlite_changji, read_models, EstimatingCounter(), recall)


def indexed(runner: ProjectionRunner, recall: Recall, story: StoryBuilder) -> None:
    runner.catch_up()
    recall.refresh_soon(story.story_id).result(timeout=30)


def recalled(ctx: Context) -> list[UUID]:
    return [n for b in ctx.explain if b.what == "recall" for n in b.node_ids]


def verbatim(ctx: Context) -> set[UUID]:
    return {n for b in ctx.explain if b.what == "verbatim" for n in b.node_ids}


def filler(story: StoryBuilder, turns: int) -> None:
    for _ in range(turns):
        story.turn(*FILLER)


def test_an_old_turn_comes_back_for_the_users_words_and_nothing_in_the_window(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    _, treasure = story.turn("地下室里有什么？", "“一箱旧银币，是守塔人的宝藏。”")
    filler(story, 20)
    story.turn("银币还在吗？", "“在，宝藏没动过。”")  # the same words, inside the window
    story.user("那箱银币宝藏现在在哪里？")
    indexed(runner, recall, story)
    ctx = views.context(story.tenant, story.story_id, None)
    block = next(b for b in ctx.explain if b.what == "recall")
    assert treasure in block.node_ids and block.scores and len(block.scores) == len(block.node_ids)
    assert not set(recalled(ctx)) & verbatim(ctx)
    last = ctx.messages[-1].content
    assert "【剧情记忆】" in last and "旧银币" in last and last.endswith("那箱银币宝藏现在在哪里？")
    assert block.message_index == block.end_message == len(ctx.messages) - 1 and block.span is not None
    shown = last[block.span[0] : block.span[1]]  # the block's own characters in that message
    assert shown.startswith("【剧情记忆】") and shown.rstrip().endswith("”") and len(shown) == block.chars
    words = next(b for b in ctx.explain if b.what == "user")
    assert words.span is not None and last[words.span[0] : words.span[1]] == "那箱银币宝藏现在在哪里？"


@pytest.mark.parametrize("question", ["潮汐表放在哪？", "那箱银币宝藏现在在哪里？"])
def test_the_share_the_recall_block_leaves_goes_back_to_the_window(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels, question: str
) -> None:
    """Nothing recalled: the context is the one without recall; a short block: the window takes the rest
    of the share back, turn by turn, and whatever it takes back in is not recalled as well."""
    words = Recall(read_models, None)  # (BM25 alone: only passages sharing the question's words)
    views = StoryViews(sqlite_changji, read_models, EstimatingCounter(), words)
    share = 400
    contexts, found = {}, None
    for k in (10, 0):
        story = StoryBuilder.start(sqlite_changji, **{**TIGHT, "recall_tokens": share, "recall_k": k})
        _, treasure = story.turn("地下室里有什么？", "“一箱旧银币，是守塔人的宝藏。”")
        filler(story, 20)
        story.user(question)
        indexed(runner, words, story)
        contexts[k] = views.context(story.tenant, story.story_id, None)
        found = found if k == 0 else treasure
    on, off = contexts[10], contexts[0]
    budget = on.budget
    assert on.tokens <= budget and off.tokens <= budget and off.cut_turns > 0
    block = next((b for b in on.explain if b.what == "recall"), None)
    if question.startswith("潮汐"):
        assert block is None and on.messages == off.messages and on.tokens == off.tokens
    else:
        assert block is not None and found in recalled(on) and block.tokens < share
        assert budget - on.tokens < share - block.tokens  # (the share's unused part: the window's again)
        assert on.cut_turns < off.cut_turns + 20 and not set(recalled(on)) & verbatim(on)


def test_an_abandoned_branch_is_never_recalled(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    user, abandoned = story.turn("地下室里有什么？", "“一箱旧银币宝藏。”")
    kept = story.reply("“只有几桶灯油。”", parent=user)  # a regenerate: the leaf moves to the sibling
    filler(story, 20)
    story.user("地下室的银币宝藏呢？")
    indexed(runner, recall, story)
    ctx = views.context(story.tenant, story.story_id, None)
    assert abandoned not in recalled(ctx)
    hits = views.recall_at(story.tenant, story.story_id, "银币宝藏", 10, None)
    assert str(abandoned) not in {h.row["node_id"] for h in hits}
    assert kept in {UUID(h.row["node_id"]) for h in views.recall_at(story.tenant, story.story_id, "灯油", 10, None)}


def test_a_hidden_turn_is_recalled_and_marked(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    _, secret = story.turn("你藏了什么？", "“一封没寄出的信。”")
    story.annotate(secret, "hide")
    filler(story, 20)
    story.user("那封没寄出的信呢？")
    indexed(runner, recall, story)
    ctx = views.context(story.tenant, story.story_id, None)
    assert secret in recalled(ctx) and "（已隐藏）" in ctx.messages[-1].content


def test_a_revised_reply_is_recalled_by_its_new_text_only(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    _, reply = story.turn("钥匙在哪？", "“在蓝色花瓶里。”")
    filler(story, 3)
    story.annotate(reply, "revise", "“在铁皮饼干盒里。”", "rewrite")
    indexed(runner, recall, story)
    new = views.recall_at(story.tenant, story.story_id, "铁皮饼干盒", 3, None)
    old = views.recall_at(story.tenant, story.story_id, "蓝色花瓶", 3, None)
    assert new and new[0].row["node_id"] == str(reply) and "饼干盒" in new[0].row["text"]
    assert all("花瓶" not in h.row["text"] for h in old)


def test_an_index_rebuilt_from_events_answers_as_the_live_one(
    sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall, views: StoryViews, tmp_path: Path
) -> None:
    story = StoryBuilder.start(sqlite_changji, **TIGHT)
    for i in range(20):
        story.turn(f"第{i}天去了哪里？", f"“第{i}天去了{'码头' if i % 3 else '山顶的灯塔'}。”")
    indexed(runner, recall, story)
    fresh_store = ReadModels(tmp_path / "fresh.sqlite")
    ProjectionRunner(sqlite_changji, fresh_store).rebuild()
    fresh = StoryViews(sqlite_changji, fresh_store, EstimatingCounter(), Recall(fresh_store, HashingEmbedder()))
    assert fresh.recall is not None
    fresh.recall.refresh_soon(story.story_id).result(timeout=30)
    for query in ("山顶的灯塔", "码头", "第7天"):
        live = views.recall_at(story.tenant, story.story_id, query, 5, None)
        rebuilt = fresh.recall_at(story.tenant, story.story_id, query, 5, None)
        assert [(h.row, h.score) for h in live] == [(h.row, h.score) for h in rebuilt]


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


def test_a_deleted_storys_index_is_gone(sqlite_changji: Changji, runner: ProjectionRunner, recall: Recall) -> None:
    story = StoryBuilder.start(sqlite_changji)
    story.turns(3)
    indexed(runner, recall, story)
    assert recall.index(story.story_id) is not None and recall.state(story.story_id).passages == 3
    sqlite_changji.stories.delete_story(story.tenant, story.story_id)
    indexed(runner, recall, story)
    assert recall.index(story.story_id) is None and recall.state(story.story_id).passages == 0


class CountingEmbedder(HashingEmbedder):
    """A local embedder that counts the passages it encodes."""

    def __init__(self) -> None:
        super().__init__()
        self.passages = 0
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str], purpose: Literal["passage", "query"] = "passage") -> np.ndarray:
        if purpose == "passage":
            self.passages += len(texts)
            self.texts += texts
        return super().encode(texts, purpose)


def everywhere(_node: str) -> bool:
    return True


def test_embeddings_kept_on_disk_are_not_computed_again_after_a_restart(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels, tmp_path: Path
) -> None:
    story = StoryBuilder.start(sqlite_changji)
    for i in range(6):
        story.turn(f"第{i}天去了哪里？", f"“第{i}天去了码头。”")
    first = CountingEmbedder()
    before = Recall(read_models, first, saved=EmbeddingCache(str(tmp_path / "embeddings.sqlite")))
    indexed(runner, before, story)
    assert first.passages == 6
    asyncio.run(before.stop())

    second = CountingEmbedder()
    after = Recall(read_models, second, saved=EmbeddingCache(str(tmp_path / "embeddings.sqlite")))
    story.turn("第6天呢？", "“第6天去了山顶的灯塔。”")
    indexed(runner, after, story)
    assert second.passages == 1  # only the new turn
    unsaved = Recall(read_models, HashingEmbedder())
    indexed(runner, unsaved, story)
    for query in ("山顶的灯塔", "码头"):
        assert [(h.row, h.score) for h in after.search(story.story_id, query, 5, 10**6, everywhere)] == [
            (h.row, h.score) for h in unsaved.search(story.story_id, query, 5, 10**6, everywhere)
        ]
    asyncio.run(after.stop())


def test_an_unreadable_embeddings_file_leaves_recall_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "embeddings.sqlite"
    broken.write_bytes(b"this is not a database" * 100)
    assert EmbeddingCache.open(str(broken)) is None
    assert "embeddings file" in caplog.text
    fine = EmbeddingCache.open(str(tmp_path / "fine.sqlite"))
    assert fine is not None
    fine.put_many({"k": np.ones(4, dtype=np.float32)})
    assert fine.get_many(["k", "absent"], 4)["k"].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert fine.get_many(["k"], 8) == {}  # saved with other dimensions: not returned
    fine.put_many({"k": np.ones(8, dtype=np.float32)})
    assert fine.get_many(["k"], 8)["k"].shape == (8,)
    fine.close()


def test_an_embeddings_file_that_fails_after_opening_costs_time_not_recall(
    sqlite_changji: Changji, runner: ProjectionRunner, read_models: ReadModels, tmp_path: Path
) -> None:
    saved = EmbeddingCache(str(tmp_path / "embeddings.sqlite"))
    saved.conn.execute("drop table vectors")  # any later failure of the file: damaged, locked, disk full
    embedder = CountingEmbedder()
    recall = Recall(read_models, embedder, saved=saved)
    story = StoryBuilder.start(sqlite_changji)
    story.turn("地下室里有什么？", "“一箱旧银币宝藏。”")
    indexed(runner, recall, story)
    assert embedder.passages == 1 and not saved.usable
    assert [h.row for h in recall.search(story.story_id, "银币宝藏", 5, 10**6, everywhere)] != []
    asyncio.run(recall.stop())


async def test_the_service_keeps_embeddings_beside_its_sqlite_files_and_closes_them(tmp_path: Path) -> None:
    endpoint = ModelSettings(base_url="http://127.0.0.1:9/v1", model="never-called")  # nothing embeds here
    service = bootstrap(Settings(data_dir=tmp_path / "data", embedder="endpoint", embeddings=endpoint))
    saved = service.recall.saved
    assert saved is not None and saved.path == str(tmp_path / "data" / "embeddings.sqlite")
    await service.start()
    await service.close()
    with pytest.raises(sqlite3.ProgrammingError):  # closed with the service
        saved.conn.execute("select 1")
    in_memory = bootstrap(
        Settings(data_dir=tmp_path / "other", embedder="endpoint", embeddings=endpoint, persistence="memory")
    )
    assert in_memory.recall.saved is None and not (tmp_path / "other" / "embeddings.sqlite").exists()
    await in_memory.close()
    hashing = bootstrap(Settings(data_dir=tmp_path / "third", embedder="hashing"))  # cheaper than a read
    assert hashing.recall.saved is None and not (tmp_path / "third" / "embeddings.sqlite").exists()
    await hashing.close()


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
