"""The archive read model: every finished turn as passages, revised by its new text, hidden flags kept,
nothing for a reply that never finished, and a deleted story's passages gone."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID, uuid4

from domain.application import Changji
from domain.ports import ChatResult
from domain.values import NodeView
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from tests.builders import StoryBuilder
from tests.compaction_support import SMALL


def passages(store: ReadModels, story_id: UUID) -> list[dict[str, object]]:
    return store.passages(story_id)


def test_a_finished_turn_is_archived_with_its_nodes_and_the_users_part(
    sqlite_changji: Changji, runner: ProjectionRunner
) -> None:
    story = StoryBuilder.start(sqlite_changji)
    user, reply = story.turn("渡船什么时候来？", "“三天后。”他说。")
    runner.catch_up()
    [row] = passages(runner.store, story.story_id)
    assert (row["node_id"], row["user_id"], row["turn"]) == (str(reply), str(user), 1)
    assert row["text"] == "渡船什么时候来？\n“三天后。”他说。" and row["user_part"] == len("渡船什么时候来？")
    assert (row["user_hidden"], row["reply_hidden"]) == (0, 0)


def test_a_long_turn_is_cut_into_passages_at_sentence_boundaries(
    sqlite_changji: Changji, runner: ProjectionRunner
) -> None:
    story = StoryBuilder.start(sqlite_changji)
    story.turn("说说灯塔。", "灯塔很老。" * 200)
    runner.catch_up()
    rows = passages(runner.store, story.story_id)
    assert len(rows) > 1 and all(len(str(r["text"])) <= 600 for r in rows)
    assert [r["user_part"] for r in rows][:2] == [len("说说灯塔。"), 0]


def test_a_revised_reply_is_archived_by_its_new_text_only(sqlite_changji: Changji, runner: ProjectionRunner) -> None:
    story = StoryBuilder.start(sqlite_changji)
    _, reply = story.turn("船票呢？", "在抽屉里。")
    runner.catch_up()
    story.annotate(reply, "revise", "船票被风吹走了。", "rewrite")
    runner.catch_up()
    assert [r["text"] for r in passages(runner.store, story.story_id)] == ["船票呢？\n船票被风吹走了。"]


def test_hidden_nodes_stay_archived_and_marked(sqlite_changji: Changji, runner: ProjectionRunner) -> None:
    story = StoryBuilder.start(sqlite_changji)
    user, reply = story.turn("你好。", "嗯。")
    story.annotate(user, "hide")
    runner.catch_up()
    story.annotate(reply, "hide")
    story.annotate(user, "unhide")
    runner.catch_up()
    [row] = passages(runner.store, story.story_id)
    assert (row["user_hidden"], row["reply_hidden"]) == (0, 1)


def test_a_reply_that_never_finished_is_not_archived(sqlite_changji: Changji, runner: ProjectionRunner) -> None:
    story = StoryBuilder.start(sqlite_changji)
    opened = sqlite_changji.turns.open_turn(story.tenant, story.story_id, uuid4(), uuid4(), "在吗？", None, "m")
    runner.catch_up()
    assert passages(runner.store, story.story_id) == []
    result = ChatResult("在。", (), "m", 1, 1, "stop")
    sqlite_changji.turns.play_round(opened.reply.id, result, 1.0, True)  # text without tools: sealed
    runner.catch_up()
    assert [r["node_id"] for r in passages(runner.store, story.story_id)] == [str(opened.reply.id)]


def test_a_deleted_storys_passages_are_gone(sqlite_changji: Changji, runner: ProjectionRunner) -> None:
    story = StoryBuilder.start(sqlite_changji)
    story.turns(3)
    runner.catch_up()
    assert runner.store.archive_seq(story.story_id) > 0
    sqlite_changji.stories.delete_story(story.tenant, story.story_id)
    runner.catch_up()
    assert passages(runner.store, story.story_id) == [] and runner.store.archive_seq(story.story_id) == 0


def test_the_archive_is_the_same_however_the_log_was_cut_into_batches(
    sqlite_changji: Changji, runner: ProjectionRunner, tmp_path: Path
) -> None:
    story = StoryBuilder.start(sqlite_changji)
    _, reply = story.turn("船票呢？", "在抽屉里。")
    runner.catch_up()
    story.annotate(reply, "hide")
    runner.catch_up()  # the hide folded alone …
    story.annotate(reply, "revise", "船票被风吹走了。", "rewrite")
    runner.catch_up()
    rebuilt = ReadModels(tmp_path / "rebuilt.sqlite")
    ProjectionRunner(sqlite_changji, rebuilt).rebuild()  # … and here everything in one batch
    assert rebuilt.dump()["passages"] == runner.store.dump()["passages"]
    [row] = runner.store.passages(story.story_id)
    assert (row["user_hidden"], row["reply_hidden"], row["text"]) == (0, 1, "船票呢？\n船票被风吹走了。")


def test_a_summary_finished_after_its_story_was_deleted_is_not_served(
    sqlite_changji: Changji, runner: ProjectionRunner
) -> None:
    story = StoryBuilder.start(sqlite_changji, **SMALL)
    story.turns(8, "第{i}句：" + "海上起了雾，灯塔的光照不远。" * 6, "第{i}答：" + "风从北边来。" * 6)
    runner.catch_up()
    leaf = story.leaf
    plan = sqlite_changji.compaction.plan_compaction(leaf, manual=True).pack  # a job planned its pack…
    assert plan is not None
    sqlite_changji.stories.delete_story(story.tenant, story.story_id)
    runner.catch_up()
    sqlite_changji.compaction.record_episode("e1", plan, "守塔人修好了窗。", "extractive", None)  # …and ended after
    runner.catch_up()
    assert any(n.episode for n in path_views(sqlite_changji, leaf))  # the summary is in the events
    assert passages(runner.store, story.story_id) == [] and runner.store.archive_seq(story.story_id) == 0


def path_views(app: Changji, leaf: UUID) -> list[NodeView]:
    out, node = [], app.node(leaf)
    while True:
        out.append(node)
        if node.parent_id is None:
            return out
        node = app.node(node.parent_id)
