"""One read-model file folded by several processes at once (the workers of one service): every event is
folded exactly once, whoever folds it, and the tables equal a rebuild's."""

from __future__ import annotations

import threading
from pathlib import Path

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from storage.notifications import SQLiteNotifications
from tests.builders import StoryBuilder
from tests.compaction_support import SMALL, compact_if_due


def folders(app: Changji, path: Path, count: int) -> list[ProjectionRunner]:
    """`count` runners on one file, each with its own connections, as separate processes would have."""
    return [ProjectionRunner(app, ReadModels(path), SQLiteNotifications.of(app)) for _ in range(count)]


def test_runners_folding_one_file_at_once_fold_every_event_once(sqlite_changji: Changji, tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    runners = folders(sqlite_changji, path, 3)
    story = StoryBuilder.start(sqlite_changji, **SMALL)
    stop = threading.Event()
    errors: list[BaseException] = []

    def fold(runner: ProjectionRunner) -> None:
        try:
            while not stop.is_set():
                runner.catch_up(batch=7)  # (small batches: many chances to interleave)
                runner.index_search(5)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=fold, args=(r,)) for r in runners]
    for thread in threads:
        thread.start()
    try:
        for i in range(40):
            _, reply = story.turn(f"第{i}问：灯塔的灯还亮着吗？" * 3, f"第{i}答：亮着，风从北边来。" * 3)
            compact_if_due(sqlite_changji, reply)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    last = int(sqlite_changji.recorder.max_notification_id())
    for runner in runners:
        assert runner.catch_up() == last
        runner.index_search()
    shared = runners[0].store.dump()
    alone = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "alone.sqlite"))
    alone.catch_up()
    alone.index_search()
    assert shared == alone.store.dump()
    assert sum(runners[0].store.count_jobs().values()) == len(shared["jobs"]) > 0  # each job row counted once
    assert runners[1].store.jobs_added == runners[0].store.jobs_added  # (each runner read them after its catch-up)


def test_a_runner_behind_another_reads_on_from_the_shared_position(sqlite_changji: Changji, tmp_path: Path) -> None:
    first, second = folders(sqlite_changji, tmp_path / "shared.sqlite", 2)
    story = StoryBuilder.start(sqlite_changji)
    story.turns(5)
    assert first.catch_up() == second.store.position()
    story.turns(2)
    assert second.catch_up() == int(sqlite_changji.recorder.max_notification_id())
    assert first.store.dump()["nodes"] == second.store.dump()["nodes"]
