"""A service that starts on empty read models over a long log replays it as a rebuild does (in bulk,
the full-text index beside it) before it serves; over a short one, or read models that hold anything,
it catches up as ever."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from service.read_side import ReadSide
from tests.builders import StoryBuilder


def started(runner: ProjectionRunner, bulk_replay: int) -> int:
    async def run() -> int:
        side = ReadSide(runner, poll_interval=60, bulk_replay=bulk_replay)
        await side.start()
        await side.stop()
        return side.position

    return asyncio.run(run())


@pytest.mark.parametrize("bulk_replay", [1, 10**9])
def test_empty_read_models_over_a_log_are_replayed_before_serving_in_bulk_from_a_size(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, tmp_path: Path, bulk_replay: int
) -> None:
    sqlite_story.turns(6)
    folded = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "folded.sqlite"))
    folded.catch_up()
    folded.index_search()
    runner = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "started.sqlite"))
    assert started(runner, bulk_replay) == folded.position
    assert (runner.indexed_beside > 0) == (bulk_replay == 1)  # a replay in bulk indexed beside the fold
    runner.index_search()
    assert runner.store.dump() == folded.store.dump()


def test_read_models_that_hold_anything_are_caught_up_not_replayed(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, runner: ProjectionRunner
) -> None:
    sqlite_story.turns(2)
    runner.catch_up()
    sqlite_story.turns(2)
    assert started(runner, 1) == runner.max_position() and runner.indexed_beside == 0
