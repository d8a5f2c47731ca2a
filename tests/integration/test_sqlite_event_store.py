"""Changji on SQLite: state survives reopening, including Story snapshots and save-point transcoding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from domain.tree.rules.paths import project_path
from domain.tree.story import Story
from tests.builders import StoryBuilder, sqlite_app


def story_state(story: Story) -> dict[str, Any]:
    fields = ("tenant_id", "card_id", "title", "root_id", "leaf_id", "settings", "saves", "worldline_names", "deleted")
    return {f: getattr(story, f) for f in fields} | {"version": story.version, "modified_on": story.modified_on}


def a_long_story_with_saves(story: StoryBuilder) -> None:
    (_, r1), *_ = story.turns(3)
    first = story.save("风暴夜")
    story.save("第二个存档")
    story.turns(100)  # >200 story events: a snapshot now holds the save points
    story.checkout(r1)
    story.turn("另一条路。", "另一个结局。")
    fork = story.save("追问船票")
    story.app.saves.rename_worldline(story.tenant, story.story_id, fork.worldline_id, "船票线")
    story.app.saves.delete_save(story.tenant, story.story_id, first.id)


def test_reopened_app_has_identical_story_when_a_snapshot_holds_save_points(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    a_long_story_with_saves(sqlite_story)
    live = sqlite_story.app.story(sqlite_story.tenant, sqlite_story.story_id)
    reopened = sqlite_app(events_path)
    assert story_state(reopened.story(sqlite_story.tenant, sqlite_story.story_id)) == story_state(live)
    assert len(live.saves) == 2 and live.version > 200


def test_story_snapshot_is_taken_every_200_events(sqlite_story: StoryBuilder, events_path: Path) -> None:
    a_long_story_with_saves(sqlite_story)
    reopened = sqlite_app(events_path)
    snapshots = list(reopened.snapshots.get(sqlite_story.story_id))  # type: ignore[union-attr]
    assert [s.originator_version for s in snapshots] == [200]


def test_reopened_app_has_identical_nodes_along_the_path(sqlite_story: StoryBuilder, events_path: Path) -> None:
    (_, r1), (u2, _) = sqlite_story.turns(2)
    sqlite_story.annotate(r1, "revise", "改写。", "typo")
    sqlite_story.annotate(u2, "hide")
    sqlite_story.annotate(r1, "star")
    reopened = sqlite_app(events_path)
    path = project_path(sqlite_story.app.node, sqlite_story.leaf)
    assert project_path(reopened.node, sqlite_story.leaf) == path
    assert [(n.text, n.hidden, n.starred, n.revisions) for n in path[1:3]] == [
        ("第1句：今天天气很好。", False, False, 0),
        ("改写。", False, True, 1),
    ]


def test_reopened_app_assembles_the_same_context(sqlite_story: StoryBuilder, events_path: Path) -> None:
    (_, r1), _ = sqlite_story.turns(2)
    sqlite_story.annotate(r1, "hide")
    reopened = StoryBuilder(sqlite_app(events_path), sqlite_story.card_id, sqlite_story.story_id, sqlite_story.root_id)
    assert reopened.context() == sqlite_story.context()
