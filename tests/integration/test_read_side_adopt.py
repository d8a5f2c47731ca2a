"""A rebuilt read-model file offered to a running service: the leader, holding the event store's write
lock, folds into it what the rebuild did not hold on a connection of its own (its own readers go on
reading the file in use), and only then names it the file in use and switches — a process that follows
the pointer reads the whole log from its first look. A catch-up that fails leaves everything as it was,
the offer kept for the next poll; a file that is not a finished rebuild is refused and withdrawn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from service.read_side import ReadSide
from storage import read_model_files
from storage.notifications import SQLiteNotifications
from storage.write_lock import WriteLock
from tests.builders import StoryBuilder


class Leader(ReadSide):
    """Notes, as the offer is caught up, which file is named in use and which this process reads (and
    can fail the catch-up, as a full disk would)."""

    fail = False
    during: tuple[str, str] | None = None

    def _fold_into(self, offered: Path) -> int:
        assert self.data_dir is not None
        self.during = (read_model_files.current(self.data_dir).name, Path(self.runner.store.path).name)
        if self.fail:
            raise OSError("disk full")
        return super()._fold_into(offered)


def offered_behind(app: Changji, story: StoryBuilder, data_dir: Path) -> Path:
    """A rebuild of the log as it stands, offered; then more turns, which it does not hold."""
    target = read_model_files.new_file(data_dir)
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


def leader(app: Changji, data_dir: Path) -> tuple[Leader, WriteLock, Path]:
    """A leader's read side on the file in use (caught up), its write lock, and that file."""
    in_use = read_model_files.current(data_dir)
    runner = ProjectionRunner(app, ReadModels(in_use), SQLiteNotifications.of(app))
    runner.catch_up()
    lock = WriteLock(data_dir / "events.lock")
    return Leader(runner, data_dir=data_dir, write_lock=lock, held=read_model_files.Held(in_use)), lock, in_use


def test_the_leader_names_a_rebuilt_file_in_use_only_once_it_holds_the_whole_log(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, data_dir: Path
) -> None:
    sqlite_story.turns(4)
    side, lock, in_use = leader(sqlite_changji, data_dir)
    target = offered_behind(sqlite_changji, sqlite_story, data_dir)

    assert adopted(side) == str(target)
    assert side.during == (in_use.name, in_use.name)  # caught up while the old file was named and read
    assert read_model_files.current(data_dir) == target and read_model_files.waiting(data_dir) is None
    assert lock.files == 1  # the move counted, for the other processes' next look
    assert side.runner.store.path == str(target)
    assert side.runner.position == side.runner.store.position() == side.runner.max_position()
    again = ProjectionRunner(sqlite_changji, ReadModels(data_dir / "again.sqlite"))
    again.catch_up()
    assert side.runner.store.dump()["nodes"] == again.store.dump()["nodes"]
    assert not in_use.exists()  # (no pointer names it and nobody holds it: removed)


def test_a_catch_up_of_the_offer_that_fails_changes_nothing_and_the_next_poll_adopts_it(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, data_dir: Path
) -> None:
    sqlite_story.turns(4)
    side, lock, in_use = leader(sqlite_changji, data_dir)
    target = offered_behind(sqlite_changji, sqlite_story, data_dir)

    side.fail = True
    with pytest.raises(OSError, match="disk full"):
        adopted(side)
    assert read_model_files.current(data_dir) == in_use and read_model_files.waiting(data_dir) == target
    assert side.runner.store.path == str(in_use) and lock.files == 0
    assert side.runner.catch_up() == side.runner.max_position()  # the file in use folds on

    side.fail = False
    assert adopted(side) == str(target)
    assert read_model_files.current(data_dir) == target and lock.files == 1


def test_an_offer_that_is_not_a_finished_rebuild_is_withdrawn_and_the_file_in_use_kept(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, data_dir: Path
) -> None:
    sqlite_story.turns(2)
    side, lock, in_use = leader(sqlite_changji, data_dir)
    unfinished = read_model_files.new_file(data_dir)
    with read_model_files.building(unfinished):
        ReadModels(unfinished).writer.conn.close()  # (never marked rebuilt)
        read_model_files.offer(data_dir, unfinished)

    assert adopted(side) is None
    assert read_model_files.waiting(data_dir) is None and read_model_files.current(data_dir) == in_use
    assert side.runner.store.path == str(in_use) and lock.files == 0
    with pytest.raises(ValueError, match="cannot be opened"):
        ReadModels.check(data_dir / "missing.sqlite")
    assert not (data_dir / "missing.sqlite").exists()  # (a look at a missing file makes none)
