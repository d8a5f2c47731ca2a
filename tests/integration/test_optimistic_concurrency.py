"""Two Changji instances on one SQLite file racing at the same leaf: one wins, one conflicts, nothing is lost."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from uuid import uuid4

import pytest

from domain.errors import NodeNotFoundError, VersionConflictError
from domain.tree.rules.paths import project_path
from tests.builders import StoryBuilder, sqlite_app


def racing_pair(story: StoryBuilder, events_path: Path) -> tuple[StoryBuilder, StoryBuilder]:
    second = replace(story, app=sqlite_app(events_path))
    assert (
        story.app.story(story.tenant, story.story_id).version == second.app.story(story.tenant, story.story_id).version
    )
    return story, second


def test_second_writer_gets_version_conflict_when_both_append_at_the_same_leaf(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    first, second = racing_pair(sqlite_story, events_path)
    first.user("先到的一句。")
    with pytest.raises(VersionConflictError):
        second.user("后到的一句。")


def test_losing_append_stores_no_node_when_it_conflicts(sqlite_story: StoryBuilder, events_path: Path) -> None:
    first, second = racing_pair(sqlite_story, events_path)
    first.user("先到的一句。")
    lost = uuid4()
    with pytest.raises(VersionConflictError):
        second.app.stories.append_node(second.tenant, second.story_id, lost, "user", "后到的一句。")
    with pytest.raises(NodeNotFoundError):
        sqlite_app(events_path).node(lost)


def test_loser_retries_on_the_winners_leaf_when_it_reloads(sqlite_story: StoryBuilder, events_path: Path) -> None:
    first, second = racing_pair(sqlite_story, events_path)
    winner = first.user("先到的一句。")
    with pytest.raises(VersionConflictError):
        second.user("后到的一句。")
    reply = second.reply("回答先到的那句。")
    path = project_path(sqlite_app(events_path).node, reply)
    assert [n.id for n in path] == [sqlite_story.root_id, winner, reply]


def test_stale_expected_version_is_refused(sqlite_story: StoryBuilder) -> None:
    version = sqlite_story.app.story(sqlite_story.tenant, sqlite_story.story_id).version
    sqlite_story.user("一句。")
    with pytest.raises(VersionConflictError):
        sqlite_story.app.stories.append_node(
            sqlite_story.tenant, sqlite_story.story_id, uuid4(), "reply", "回答。", None, version
        )
