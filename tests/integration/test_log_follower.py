"""Two processes' worth of Changji on one SQLite event store: what one saves, the other's follower folds
into its caches before it reads or decides; a command that loses a race runs again, once nothing saved."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from uuid import uuid4

import pytest

from domain.application import Changji
from domain.errors import ConcurrentWriteError, VersionConflictError
from domain.tree.events import StoryDeleted
from domain.tree.rules.paths import project_path
from service.log_follower import ASK_SECONDS, LogFollower
from storage.notifications import SQLiteNotifications, StoredRow
from storage.write_lock import WriteLock
from tests.builders import StoryBuilder, sqlite_app
from tests.compaction_support import SMALL, compact


def other_process(story: StoryBuilder, events_path: Path) -> tuple[StoryBuilder, LogFollower]:
    """The same story driven by a second app on the same file, with its follower (which has seen
    everything up to now, as a process started now would)."""
    app = sqlite_app(events_path)
    follower = LogFollower(app, SQLiteNotifications.of(app))
    second = replace(story, app=app)
    second.app.story(story.tenant, story.story_id)  # cached, as a serving process would hold it
    return second, follower


def test_a_cached_story_takes_the_other_process_s_events(sqlite_story: StoryBuilder, events_path: Path) -> None:
    second, follower = other_process(sqlite_story, events_path)
    before = second.app.story(second.tenant, second.story_id).version
    user, reply = sqlite_story.turn("灯塔还亮着吗？", "亮着。")
    stale = second.app.story(second.tenant, second.story_id)
    assert stale.version == before and stale.leaf_id != reply  # the cache alone does not know
    follower.follow()
    story = second.app.story(second.tenant, second.story_id)
    assert story is stale  # the same cached object, moved on (not read again whole)
    assert story.version == before + 2 and story.leaf_id == reply
    assert [n.id for n in project_path(second.app.node, story.leaf_id)][-2:] == [user, reply]


def test_nodes_made_by_the_other_process_are_held_from_their_events_without_a_read(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    second, follower = other_process(sqlite_story, events_path)
    user, reply = sqlite_story.turn("船几时到？", "明早。")
    sqlite_story.annotate(reply, "star")
    follower.follow()
    reads: list[object] = []
    recorder = second.app.recorder
    select = recorder.select_events
    recorder.select_events = lambda *a, **k: reads.append(a) or select(*a, **k)  # type: ignore[method-assign]
    assert second.app.node(user).text == "船几时到？" and second.app.node(reply).text == "明早。"
    assert second.app.node(reply).starred and second.app.node(reply).version == sqlite_story.app.node(reply).version
    assert reads == []  # held from the followed events: no read of the store


def test_a_cached_node_view_follows_a_revision_saved_elsewhere(sqlite_story: StoryBuilder, events_path: Path) -> None:
    _, reply = sqlite_story.turn("风大吗？", "很大。")
    second, follower = other_process(sqlite_story, events_path)
    assert second.app.node(reply).text == "很大。"
    epoch = second.app.render_epoch(second.story_id)
    sqlite_story.annotate(reply, "revise", "风小了。", "typo")
    follower.follow()
    assert second.app.node(reply).text == "风小了。"
    assert second.app.render_epoch(second.story_id) == epoch + 1  # cached contexts of the story start over


def test_a_view_whose_aggregate_left_the_cache_is_dropped_not_kept_stale(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    _, reply = sqlite_story.turn("风大吗？", "很大。")
    second, follower = other_process(sqlite_story, events_path)
    second.app.node(reply)
    second.app._evict(reply)  # (as the cache's bound would)
    sqlite_story.annotate(reply, "hide")
    follower.follow()
    assert second.app.node(reply).hidden


def test_a_summary_saved_elsewhere_is_known_to_the_windows_here(sqlite_changji: Changji, events_path: Path) -> None:
    story = StoryBuilder.start(sqlite_changji, **SMALL)
    story.turns(8, user="第{i}问" + "雨" * 60, reply="第{i}答" + "风" * 60)
    second, follower = other_process(story, events_path)
    assert not second.app.summarized(second.story_id)
    compact(story.app, story.leaf, manual=True)
    follower.follow()
    recorded = second.app.summarized(second.story_id)
    assert recorded and recorded == story.app.summarized(story.story_id)
    follower.position = 0  # followed again from the start: nothing twice
    follower.follow()
    assert second.app.summarized(second.story_id) == recorded


def test_without_a_follow_the_second_writer_conflicts_and_with_one_it_does_not(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    second, follower = other_process(sqlite_story, events_path)
    first_words = sqlite_story.user("先到的一句。")
    with pytest.raises(ConcurrentWriteError):
        second.user("后到的一句。")  # its story was a version behind
    sqlite_story.reply("回答。")
    later = follower.command(
        second.app.stories.append_node, second.tenant, second.story_id, uuid4(), "user", "再一句。"
    )
    path = [n.id for n in project_path(second.app.node, later.node.id)]
    assert first_words in path


def test_a_command_that_lost_a_race_runs_again_on_what_the_store_holds(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    second, follower = other_process(sqlite_story, events_path)
    runs = []

    def append_after_a_rival() -> object:
        runs.append(1)
        if len(runs) == 1:  # another process saves between this one's look and its save
            sqlite_story.user("抢先的一句。")
            sqlite_story.reply("抢先的回答。")
        return second.app.stories.append_node(second.tenant, second.story_id, uuid4(), "user", "后来的一句。")

    follower.command(append_after_a_rival)
    assert len(runs) == 2
    leaf = second.app.story(second.tenant, second.story_id).leaf_id
    assert [n.text for n in project_path(second.app.node, leaf)][-3:] == [
        "抢先的一句。",
        "抢先的回答。",
        "后来的一句。",
    ]


def test_a_command_that_saved_before_it_lost_a_race_is_not_run_again(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    second, follower = other_process(sqlite_story, events_path)
    runs = []

    def save_then_lose() -> None:
        runs.append(1)
        second.user("先存下的一句。")
        replace(sqlite_story, app=sqlite_app(events_path)).reply("别处的回答。")  # (this one's story is now behind)
        second.reply("这里的回答。")

    with pytest.raises(ConcurrentWriteError):
        follower.command(save_then_lose)
    assert len(runs) == 1


def test_a_stale_if_match_is_a_conflict_and_is_not_retried(sqlite_story: StoryBuilder, events_path: Path) -> None:
    second, follower = other_process(sqlite_story, events_path)
    version = second.app.story(second.tenant, second.story_id).version
    sqlite_story.user("先到的一句。")
    runs = []

    def append_if_match() -> object:
        runs.append(1)
        return second.app.stories.append_node(second.tenant, second.story_id, uuid4(), "reply", "回答。", None, version)

    with pytest.raises(VersionConflictError) as raised:
        follower.command(append_if_match)
    assert not isinstance(raised.value, ConcurrentWriteError) and len(runs) == 1


def test_listeners_hear_only_other_processes_events(sqlite_story: StoryBuilder, events_path: Path) -> None:
    second, follower = other_process(sqlite_story, events_path)
    heard: list[object] = []
    follower.on(StoryDeleted, lambda event: heard.append(event.originator_id))
    other = StoryBuilder.start(second.app)
    second.app.stories.delete_story(other.tenant, other.story_id)  # this process's own deletion
    sqlite_story.app.stories.delete_story(sqlite_story.tenant, sqlite_story.story_id)
    follower.follow()
    assert heard == [sqlite_story.story_id]


class CountedReads(SQLiteNotifications):
    """The log, counting how often it is asked."""

    asked = 0

    def rows(self, start: int, limit: int, stop: int | None = None) -> list[StoredRow]:
        self.asked += 1
        return super().rows(start, limit, stop)


def locked_process(
    story: StoryBuilder, events_path: Path, lock: WriteLock
) -> tuple[StoryBuilder, LogFollower, CountedReads]:
    """The same story driven by a second app that takes `lock` around its commits, with its follower
    (which counts the log's reads and looks at the lock's count)."""
    app = sqlite_app(events_path)
    app.write_lock = lock
    reader = CountedReads(str(events_path), app.mapper)
    return replace(story, app=app), LogFollower(app, reader, lock), reader


def test_the_log_is_asked_only_when_another_process_let_the_write_lock_go(
    sqlite_story: StoryBuilder, events_path: Path, tmp_path: Path
) -> None:
    here, there = WriteLock(tmp_path / "events.lock"), WriteLock(tmp_path / "events.lock")
    second, follower, reader = locked_process(sqlite_story, events_path, here)
    app = second.app
    follower.command(second.app.stories.append_node, second.tenant, second.story_id, uuid4(), "user", "这里写的。")
    asked = reader.asked
    follower.follow()
    follower.read(app.story, second.tenant, second.story_id)
    assert reader.asked == asked  # only this process wrote since: nothing to ask
    rival = replace(sqlite_story, app=sqlite_app(events_path))
    rival.app.write_lock = there
    reply = rival.reply("别处写的。")  # (the other process's commit lets its lock go)
    story = follower.read(app.story, second.tenant, second.story_id)
    assert reader.asked == asked + 1 and story.leaf_id == reply
    follower._asked -= ASK_SECONDS  # (a second later: asked whatever the count says)
    follower.follow()
    assert reader.asked == asked + 2
    here.close()
    there.close()


def test_a_hide_read_back_whole_before_it_is_followed_still_starts_the_story_s_contexts_over(
    sqlite_story: StoryBuilder, events_path: Path
) -> None:
    _, reply = sqlite_story.turn("风大吗？", "很大。")
    second, follower = other_process(sqlite_story, events_path)
    epoch = second.app.render_epoch(second.story_id)
    sqlite_story.annotate(reply, "hide")
    assert second.app.node(reply).hidden  # loaded whole now, the hide in it, before the log was followed
    follower.follow()
    assert second.app.render_epoch(second.story_id) == epoch + 1


def test_a_command_that_lost_a_race_asks_the_log_again_whatever_the_count_says(
    sqlite_story: StoryBuilder, events_path: Path, tmp_path: Path
) -> None:
    here = WriteLock(tmp_path / "events.lock")
    second, follower, _ = locked_process(sqlite_story, events_path, here)
    second.app.story(second.tenant, second.story_id)
    follower.follow()
    sqlite_story.turn("没拿锁的一句。", "没拿锁的回答。")  # (a writer that does not take the lock: the count stays)
    follower.command(second.app.stories.append_node, second.tenant, second.story_id, uuid4(), "user", "这里的一句。")
    assert follower.raced == 1
    leaf = second.app.story(second.tenant, second.story_id).leaf_id
    assert [n.text for n in project_path(second.app.node, leaf)][-3:] == [
        "没拿锁的一句。",
        "没拿锁的回答。",
        "这里的一句。",
    ]
    here.close()


def test_the_follower_moves_past_this_process_s_own_writes_without_reading_them(
    sqlite_story: StoryBuilder, events_path: Path, tmp_path: Path
) -> None:
    here = WriteLock(tmp_path / "events.lock")
    second, follower, reader = locked_process(sqlite_story, events_path, here)
    app = second.app
    for text in ("一", "二", "三"):
        follower.command(second.app.stories.append_node, second.tenant, second.story_id, uuid4(), "user", text)
        follower.command(second.app.stories.append_node, second.tenant, second.story_id, uuid4(), "reply", text)
    asked = reader.asked
    assert follower.follow() == app.last_saved == int(app.recorder.max_notification_id())
    assert reader.asked == asked
    here.close()
