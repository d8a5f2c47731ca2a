"""Nodes read in bulk: `Changji.preload` reads the views a process does not hold a few hundred per query,
each equal to a load's; a compaction's plan on a path this process never read asks the read models for
the path once and reads it so, and a warm one asks nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import UUID

from domain.application import Changji
from domain.tree.node_views import PRELOAD_BATCH
from domain.tree.rules.paths import walk_up
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from schedulers.outcomes import Failed
from schedulers.workers.compaction import CompactWorker, Inline
from storage.notifications import SQLiteNotifications
from tests.builders import TENANT, StoryBuilder, sqlite_app
from tests.compaction_support import SMALL, compact_if_due


def bulk(app: Changji) -> Changji:
    """The app with the store's bulk reader, as the service sets it."""
    reader = SQLiteNotifications.of(app)
    assert reader is not None
    app.bulk_events = reader.events_of
    return app


def test_preloaded_views_equal_loaded_ones_and_held_ones_are_not_read_again(
    sqlite_changji: Changji, events_path: Path
) -> None:
    story = StoryBuilder.start(sqlite_changji, **SMALL)
    for i in range(PRELOAD_BATCH // 2 + 10):  # (more nodes than one query reads)
        user, reply = story.turn(f"第{i}问", f"第{i}答")
        compact_if_due(sqlite_changji, reply)
        if i % 7 == 0:
            sqlite_changji.nodes.hide_node(TENANT, user)
        if i % 11 == 0:
            sqlite_changji.nodes.star_node(TENANT, reply)
    path = [view.id for view in walk_up(sqlite_changji.node, story.leaf)]
    assert len(path) > PRELOAD_BATCH

    one_by_one = sqlite_app(events_path)  # (no bulk reader: loads)
    assert one_by_one.preload(path[:5]) == 5
    assert all(one_by_one.held_view(node_id) == sqlite_changji.node(node_id) for node_id in path[:5])
    cold = bulk(sqlite_app(events_path))
    assert cold.preload([*path[:3], path[0]]) == 3  # (an id twice is read once)
    assert cold.preload(path) == len(path) - 3
    assert all(cold.held_view(node_id) == sqlite_changji.node(node_id) for node_id in path)
    assert any(cold.held_view(node_id).hidden for node_id in path)  # type: ignore[union-attr]
    assert any(cold.held_view(node_id).episode is not None for node_id in path)  # type: ignore[union-attr]
    assert cold.preload(path) == 0


def test_the_first_unheld_node_is_looked_for_only_up_to_the_summary_boundary(
    sqlite_changji: Changji, events_path: Path
) -> None:
    story = StoryBuilder.start(sqlite_changji, **SMALL)
    for i in range(12):
        _, reply = story.turn(f"第{i}问", f"第{i}答")
        compact_if_due(sqlite_changji, reply)
    cold = bulk(sqlite_app(events_path))
    assert cold.compaction.first_unheld(story.leaf) == story.leaf
    below = [view.id for view in walk_up(sqlite_changji.node, story.leaf)]
    boundary = next(i for i, node_id in enumerate(below) if sqlite_changji.node(node_id).episode is not None)
    cold.preload(below[:boundary])
    assert cold.compaction.first_unheld(story.leaf) == below[boundary]  # the boundary itself is read too
    cold.preload(below[boundary : boundary + 1])
    assert cold.compaction.first_unheld(story.leaf) is None  # (nothing above the boundary is walked)


def test_a_plan_on_a_path_never_read_here_asks_for_the_path_once_and_reads_it_in_bulk(
    sqlite_changji: Changji, events_path: Path, tmp_path: Path
) -> None:
    story = StoryBuilder.start(sqlite_changji, pack_turns=0)  # played with compaction off, as an import is
    story.turns(30)
    store = ReadModels(tmp_path / "read_models.sqlite")
    ProjectionRunner(sqlite_changji, store).catch_up()
    sqlite_changji.stories.configure_story(TENANT, story.story_id, SMALL, None)
    asked: list[UUID] = []

    async def path_of(node_id: UUID) -> list[UUID]:
        asked.append(node_id)
        return store.path_up(node_id)

    cold = bulk(sqlite_app(events_path))
    worker = CompactWorker(cold, Inline(), None, path_of=path_of)
    done = asyncio.run(worker.compact(story.leaf, manual=False, job_node=None))
    assert not isinstance(done, Failed) and done.episodes, done
    assert asked == [cold.node(story.leaf).parent_id]  # (the leaf itself was read to find its story)
    path = store.path_up(story.leaf)
    assert len(path) > 60 and all(cold.held_view(node_id) is not None for node_id in path)
    again = asyncio.run(worker.compact(story.leaf, manual=False, job_node=None))
    assert not isinstance(again, Failed) and again.nothing_due
    assert len(asked) == 1  # warm: asked nothing
