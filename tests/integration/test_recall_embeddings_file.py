"""Embeddings saved in a file beside the SQLite files: not computed again, and a broken file costs time, not recall."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from api.bootstrap import bootstrap
from api.settings import ModelSettings, Settings
from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.embedders import HashingEmbedder
from service.recall import Recall
from storage.embedding_cache import EmbeddingCache
from tests.builders import StoryBuilder
from tests.integration.recall_support import CountingEmbedder, everywhere, indexed


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
