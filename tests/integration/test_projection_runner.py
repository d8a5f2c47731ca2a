"""The catch-up runner stops (never skips) on an event that fails to fold, and resumes from there."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from domain.application import Changji
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from tests.builders import StoryBuilder, sqlite_app


class FaultyReadModels(ReadModels):
    """Read models whose database refuses to fold a hidden flag (NodeHidden) until `fix()`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writer.execute(
            "create trigger refuse_hide before update of hidden on nodes when new.hidden = 1"
            " begin select raise(abort, 'injected fault: NodeHidden cannot be folded'); end"
        )

    def fix(self) -> None:
        self.writer.execute("drop trigger refuse_hide")


@pytest.fixture
def faulty(sqlite_changji: Changji, tmp_path: Path) -> ProjectionRunner:
    return ProjectionRunner(sqlite_changji, FaultyReadModels(tmp_path / "faulty.sqlite"))


def story_with_a_hide_after(story: StoryBuilder, runner: ProjectionRunner) -> tuple[int, str]:
    """Two turns folded; then a new user node, a hide and a reply, not yet folded. Returns (position, new node)."""
    (_, r1), _ = story.turns(2)
    position = runner.catch_up()
    new = story.user("还没折叠的一句。")
    story.annotate(r1, "hide")
    story.reply("之后的回答。")
    return position, str(new)


def node_ids(store: ReadModels) -> set[str]:
    return {r["id"] for r in store.dump()["nodes"]}


def test_runner_raises_and_holds_its_position_when_a_fold_fails(
    sqlite_story: StoryBuilder, faulty: ProjectionRunner
) -> None:
    position, _ = story_with_a_hide_after(sqlite_story, faulty)
    with pytest.raises(sqlite3.IntegrityError, match="injected fault"):
        faulty.catch_up()
    assert (faulty.position, faulty.store.position()) == (position, position)


def test_runner_never_skips_the_failing_event_when_called_again(
    sqlite_story: StoryBuilder, faulty: ProjectionRunner
) -> None:
    position, _ = story_with_a_hide_after(sqlite_story, faulty)
    for _ in range(2):
        with pytest.raises(sqlite3.IntegrityError, match="injected fault"):
            faulty.catch_up()
    assert faulty.store.position() == position


def test_read_models_show_nothing_past_the_position_when_a_fold_fails(
    sqlite_story: StoryBuilder, faulty: ProjectionRunner
) -> None:
    _, new = story_with_a_hide_after(sqlite_story, faulty)
    with pytest.raises(sqlite3.IntegrityError, match="injected fault"):
        faulty.catch_up()
    assert new not in node_ids(faulty.store)


def test_runner_resumes_from_its_position_when_the_fault_is_fixed(
    sqlite_story: StoryBuilder, faulty: ProjectionRunner, runner: ProjectionRunner
) -> None:
    story_with_a_hide_after(sqlite_story, faulty)
    with pytest.raises(sqlite3.IntegrityError, match="injected fault"):
        faulty.catch_up()
    faulty.store.fix()  # type: ignore[attr-defined]
    assert faulty.catch_up() == faulty.max_position()
    runner.catch_up()
    assert faulty.store.dump() == runner.store.dump()


def test_a_catch_up_to_a_position_folds_the_events_just_saved_as_a_rebuild_would(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, runner: ProjectionRunner, tmp_path: Path
) -> None:
    sqlite_story.turns(2)
    runner.catch_up()
    (_, r1), _ = sqlite_story.turns(2)
    sqlite_story.annotate(r1, "hide")
    position = int(sqlite_changji.recorder.max_notification_id() or 0)
    assert sqlite_changji.recent(runner.position, position) is not None  # folded from memory
    assert runner.catch_up(position) == position
    rebuilt = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "rebuilt.sqlite"))
    rebuilt.rebuild()
    runner.index_search()  # the rebuild indexes every text; the live index catches up when asked
    assert runner.store.dump() == rebuilt.store.dump()


def test_events_saved_by_another_process_in_between_are_read_back(
    sqlite_changji: Changji, sqlite_story: StoryBuilder, runner: ProjectionRunner, events_path: Path
) -> None:
    runner.catch_up()
    sqlite_story.turn()
    other = StoryBuilder.start(sqlite_app(events_path))  # another process writes between our saves
    sqlite_story.turn()
    position = int(sqlite_changji.recorder.max_notification_id() or 0)
    assert sqlite_changji.recent(runner.position, position) is None
    assert runner.catch_up(position) == position
    assert str(other.root_id) in node_ids(runner.store)
