"""A store written when every event lived in `domain.events` (its events and aggregates named by the
topics of then: `tests/fixtures/stores/`, written by `changji demo` and a few API calls) is read as
written: aggregates load, projections rebuild, other processes follow it, and new events go beside."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from domain.card.card import Card
from domain.tree.events import StoryDeleted
from domain.tree.story import Story
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from service.log_follower import LogFollower
from storage.notifications import SQLiteNotifications
from tests.builders import sqlite_app

OLD_STORE = Path(__file__).parents[1] / "fixtures" / "stores" / "events_domain_events_topics.sqlite"
TENANT = "demo"


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    path = tmp_path / "events.sqlite"
    shutil.copy(OLD_STORE, path)
    return path


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


def test_the_fixture_holds_only_the_old_topics(old_store: Path) -> None:
    topics = {t for (t,) in rows(old_store, "select distinct topic from stored_events")}
    assert len(topics) >= 20 and all(t.startswith("domain.events:") for t in topics)
    assert any(
        b'"originator_topic":"domain.story:Story"' in s for (s,) in rows(old_store, "select state from stored_events")
    )


def test_every_aggregate_loads_and_new_events_are_saved_beside_the_old(old_store: Path) -> None:
    app = sqlite_app(old_store)
    ids = [UUID(str(i)) for (i,) in rows(old_store, "select distinct originator_id from stored_events")]
    loaded = [app.repository.get(i) for i in ids]
    stories = [a for a in loaded if isinstance(a, Story)]
    cards = [a for a in loaded if isinstance(a, Card)]
    assert len(stories) == 2 and len(cards) == 2
    merged = next(c for c in cards if c.merged_into is not None)
    story = max(stories, key=lambda s: s.version)
    assert story.leaf_id is not None and not story.deleted
    assert merged.merged_into == story.card_id and app.merge_target(merged.id) == story.card_id
    leaf = story.leaf_id
    appended = app.stories.append_node(TENANT, story.id, uuid4(), "user", "风停了吗？")
    assert app.node(appended.node.id).text == "风停了吗？" and appended.node.parent_id == leaf
    new = {t for (t,) in rows(old_store, "select distinct topic from stored_events")} - {
        t for (t,) in rows(OLD_STORE, "select distinct topic from stored_events")
    }
    assert new and not any(t.startswith("domain.events:") for t in new)
    app.close()


def test_projections_rebuilt_from_the_old_store_show_its_story(old_store: Path, tmp_path: Path) -> None:
    app = sqlite_app(old_store)
    store = ReadModels(tmp_path / "read_models.sqlite")
    position = ProjectionRunner(app, store).catch_up()
    assert position == rows(old_store, "select max(rowid) from stored_events")[0][0]
    dump = store.dump()
    assert len(dump["nodes"]) >= 60
    assert any(r["hidden"] for r in dump["nodes"]) and any(r["starred"] for r in dump["nodes"])
    assert sum("灯塔" in r["text"] for r in dump["node_texts"]) >= 20
    app.close()


def test_another_process_follows_the_old_topics_by_class(old_store: Path) -> None:
    """A process that reads the log from its start hears the old `domain.events:StoryDeleted` by its
    class, and counts the old hide and revision as changes of how the story's nodes render."""
    app = sqlite_app(old_store)
    deleted: list[StoryDeleted] = []
    follower = LogFollower(app, SQLiteNotifications.of(app))
    follower.position = 0  # (from the start of the log, as a process that saw none of it)
    follower.on(StoryDeleted, deleted.append)
    follower.follow(ask=True)
    assert len(deleted) == 1
    rerendering = rows(
        old_store,
        "select originator_id from stored_events where topic in ('domain.events:NodeHidden', 'domain.events:ReplyRevised')",
    )
    assert len(rerendering) == 2
    node = app.node_aggregate(UUID(str(rerendering[0][0])))
    assert node.story_id is not None and app.render_epoch(node.story_id) == 2
    app.close()
