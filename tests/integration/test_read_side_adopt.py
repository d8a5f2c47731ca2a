"""A rebuilt read-model file offered to a running service: the leader switches to it under the event
store's write lock, folds what the rebuild did not hold, and only then names it the file in use — a
process that follows the pointer reads the whole log from its first look. A catch-up that fails leaves
the file in use as it was and withdraws the offer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from service.read_side import ReadSide
from storage import read_model_files
from storage.notifications import SQLiteNotifications
from storage.write_lock import WriteLock
from tests.builders import StoryBuilder


class Watched(ProjectionRunner):
    """A runner that notes which file the data dir names in use at each catch-up (and can fail one on
    the offered file)."""

    def __init__(self, app: Changji, store: ReadModels, data_dir: Path, fail_on: Path | None = None) -> None:
        super().__init__(app, store, SQLiteNotifications.of(app))
        self.data_dir, self.fail_on = data_dir, fail_on
        self.named: list[tuple[str, str]] = []  # (the file folded, the file named in use) per catch-up

    def catch_up(self, *args: Any, **kwargs: Any) -> int:
        self.named.append((Path(self.store.path).name, read_model_files.current(self.data_dir).name))
        if self.fail_on is not None and self.store.path == str(self.fail_on):
            raise OSError("disk full")
        return super().catch_up(*args, **kwargs)


def offered_behind(app: Changji, story: StoryBuilder, data_dir: Path, target: Path | None = None) -> Path:
    """A rebuild of the log as it stands (into `target`, else a new file), offered; then more turns,
    which it does not hold."""
    target = target or read_model_files.new_file(data_dir)
    with read_model_files.building(target):
        rebuilt = ProjectionRunner(app, ReadModels(target), SQLiteNotifications.of(app))
        rebuilt.rebuild()
        rebuilt.store.mark_rebuilt()
        rebuilt.store.writer.conn.close()
        read_model_files.offer(data_dir, target)
    story.turns(3)
    return target


def adopted(side: ReadSide) -> str | None:
    async def run() -> str | None:
        return await side.adopt_offered()

    return asyncio.run(run())


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    return folder


def test_the_leader_names_a_rebuilt_file_in_use_only_once_it_holds_the_whole_log(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, data_dir: Path
) -> None:
    sqlite_story.turns(4)
    in_use = read_model_files.current(data_dir)
    runner = Watched(sqlite_changji, ReadModels(in_use), data_dir)
    runner.catch_up()
    target = offered_behind(sqlite_changji, sqlite_story, data_dir)
    lock = WriteLock(data_dir / "events.lock")
    side = ReadSide(runner, data_dir=data_dir, write_lock=lock, held=read_model_files.hold(in_use))

    assert adopted(side) == str(target)
    assert (target.name, in_use.name) in runner.named  # caught up while the old file was still named in use
    assert read_model_files.current(data_dir) == target and read_model_files.waiting(data_dir) is None
    assert lock.files == 1  # the move counted, for the other processes' next look
    assert runner.store.position() == runner.max_position()
    again = ProjectionRunner(sqlite_changji, ReadModels(data_dir / "again.sqlite"))
    again.catch_up()
    assert runner.store.dump()["nodes"] == again.store.dump()["nodes"]


def test_a_catch_up_of_the_offer_that_fails_leaves_the_file_in_use_and_withdraws_the_offer(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, data_dir: Path
) -> None:
    sqlite_story.turns(4)
    in_use = read_model_files.current(data_dir)
    target = read_model_files.new_file(data_dir)
    target.with_name(f"{target.name}.building").unlink()  # (the name reserved; the rebuild below makes it)
    runner = Watched(sqlite_changji, ReadModels(in_use), data_dir, fail_on=target)
    runner.catch_up()
    offered_behind(sqlite_changji, sqlite_story, data_dir, target)
    lock = WriteLock(data_dir / "events.lock")
    side = ReadSide(runner, data_dir=data_dir, write_lock=lock, held=read_model_files.hold(in_use))

    with pytest.raises(OSError, match="disk full"):
        adopted(side)
    assert read_model_files.current(data_dir) == in_use and read_model_files.waiting(data_dir) is None
    assert runner.store.path == str(in_use) and lock.files == 0
    assert not target.exists()  # (no pointer names it and nobody holds it: removed)
    assert runner.catch_up() == runner.max_position()  # the file in use folds on
