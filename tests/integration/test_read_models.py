"""Read models: Chinese full-text search, tree queries, and rebuilt == live (invariant 4)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

from domain.application import Changji
from domain.memory.card_memory import Usage
from domain.memory.offline_merge import offline_merge
from domain.tree.commands.jobs import SideCall
from domain.values import StorySettings
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from tests.builders import StoryBuilder, a_card
from tests.compaction_support import compact_if_due


def a_busy_tenant(app: Changji, runner: ProjectionRunner) -> StoryBuilder:
    """Branches, regenerates, hides, stars, revisions, saves and deletes, folded live step by step."""
    story = StoryBuilder.start(app)
    (u1, r1), (u2, r2) = story.turns(2)
    runner.catch_up()
    story.save("风暴夜", tree=runner.store)
    story.reply("重新生成的回答。", parent=u2)
    story.turn("分支的问题：船票呢？", "沈砚把船票收了起来。", parent=r1)
    runner.catch_up()
    doomed = story.save("追问船票", tree=runner.store)
    story.app.nodes.hide_nodes(story.tenant, story.story_id, [u1, r2])
    story.annotate(r2, "unhide")
    story.annotate(r1, "star")
    story.annotate(r1, "revise", "改写后的第一答：天气很好。", "typo")
    call = SideCall("scribe", "side", 30, 10, 5.0, "ok")
    app.scenes.record_scribe_patch(r1, {"location": "灯塔", "characters": {"沈砚": {"at": "灯塔"}}}, [], call)
    app.scenes.record_scene_edit(
        story.tenant, story.story_id, story.root_id, {"time": "第一夜"}, ["a warning"]
    )  # late, far up
    app.jobs.record_job_failure(r2, "scribe", "http 500", datetime(2030, 1, 1, tzinfo=UTC), call)
    app.jobs.record_job_skip(r2, "scribe", "nothing changed in this turn")
    packed = StoryBuilder.start(app, keep_turns=1, pack_turns=2, episodes_kept=0, min_pack_chars=0)
    packed.turns(3)
    compact_if_due(app, packed.leaf)  # an announced pack, an episode folded into a digest, the job done
    story.app.saves.delete_save(story.tenant, story.story_id, doomed.id)
    story.app.stories.configure_story(story.tenant, story.story_id, {"keep_turns": 4}, "灯塔")
    runner.catch_up()
    gone = StoryBuilder.start(app)
    gone.turn()
    app.stories.delete_story(gone.tenant, gone.story_id)
    app.cards.delete_card(gone.tenant, gone.card_id)
    card_id = uuid4()
    app.cards.create_card(card_id, story.tenant, a_card(), StorySettings())
    app.cards.update_card(story.tenant, card_id, a_card(name="改名的卡", tags=["海岛"]), StorySettings())
    moved = StoryBuilder.start(app)  # its card merged into the renamed one, the story moved there
    moved.turn()
    app.cards.merge_card(moved.tenant, moved.card_id, card_id)
    app.stories.move_stories(moved.tenant, [moved.story_id], moved.card_id, card_id)
    runner.catch_up()
    a_card_memory(app, runner, story)
    return story


def a_card_memory(app: Changji, runner: ProjectionRunner, story: StoryBuilder) -> None:
    """Two stories recapped and merged, one forgotten and remembered, the user's edits, folded step by step."""
    other_id, other_root = uuid4(), uuid4()
    app.stories.start_story(other_id, other_root, story.tenant, story.card_id, 0, "", {})
    other = StoryBuilder(app, story.card_id, other_id, other_root, story.tenant)
    other.turn("灯还亮着吗？", "亮着。")
    for number, played in enumerate((story, other), 1):
        span = (played.root_id, played.leaf)
        app.memory.record_recap(
            played.tenant, story.card_id, played.story_id, f"# 第{number}局\n\n## 剧情脉络\n灯塔的事。\n",
            f"fingerprint-{number}", span, 2, 0, "offline", Usage(),
        )  # fmt: skip
        runner.catch_up()
    memory = app.memory.of(story.card_id)
    assert memory is not None
    recaps = {s: r.text for s, r in memory.remembered.items()}
    handbook, resident = offline_merge(recaps, list(recaps), "zh")
    app.memory.record_merge(story.card_id, handbook, resident, "offline", Usage(), memory.version)
    runner.catch_up()
    app.memory.forget_story(story.card_id, other.story_id, "deleted")
    app.memory.remember_story(story.card_id, other.story_id)
    app.memory.edit_resident(story.tenant, story.card_id, "用户写的常驻摘要", None)
    app.memory.edit_recap(story.tenant, story.card_id, story.story_id, "# 改过的复盘\n", None)
    runner.catch_up()


def searches(runner: ProjectionRunner, story: StoryBuilder) -> list[Any]:
    runner.index_search()  # as the search endpoint does first
    return [runner.store.search(story.story_id, q) for q in ("天气", "船票", "天", "improbable")]


def test_rebuilt_read_models_equal_live_ones(sqlite_changji: Changji, runner: ProjectionRunner) -> None:
    story = a_busy_tenant(sqlite_changji, runner)
    live_hits = searches(runner, story)
    live = runner.store.dump()
    assert {(j["status"], j["attempts"]) for j in live["jobs"]} >= {("done", 0), ("skipped", 1)}
    assert any(j["kind"] == "compact" and j["status"] == "done" for j in live["jobs"])
    assert len(live["scene_patches"]) == 2 and len(live["scenes"]) == 2
    scene = runner.store.scene(story.leaf)
    assert scene is not None and scene.snapshot.time == "第一夜"
    assert live["node_texts_fts"] and runner.store.position("search") == max(t["seq"] for t in live["node_texts"])
    (memory,) = live["card_memories"]
    assert (
        memory["resident"] == "用户写的常驻摘要"
        and memory["merges"] == 1
        and memory["changed_seq"] > memory["merged_seq"]
    )
    assert sorted((r["version"], r["by_user"], r["forgotten"]) for r in live["memory_recaps"]) == [(1, 0, 0), (2, 1, 0)]
    assert runner.store.resident_of(story.card_id) == ("用户写的常驻摘要", memory["version"])
    runner.rebuild()
    assert runner.store.dump() == live  # the full-text index too: the rebuild indexes every text
    assert searches(runner, story) == live_hits


def test_fresh_read_models_equal_live_ones(sqlite_changji: Changji, runner: ProjectionRunner, tmp_path: Path) -> None:
    a_busy_tenant(sqlite_changji, runner)
    fresh = ProjectionRunner(sqlite_changji, ReadModels(tmp_path / "fresh.sqlite"))
    fresh.catch_up()
    fresh.index_search()
    runner.index_search()
    assert fresh.store.dump() == runner.store.dump()


def test_live_read_models_show_every_fact(sqlite_changji: Changji, runner: ProjectionRunner) -> None:
    story = a_busy_tenant(sqlite_changji, runner)
    rows = [r for r in runner.store.dump()["nodes"] if r["story_id"] == str(story.story_id)]
    flags = sorted((r["depth"], r["hidden"], r["starred"], r["revisions"]) for r in rows)
    assert flags == [(0, 0, 0, 0), (1, 1, 0, 0), (2, 0, 1, 1), (3, 0, 0, 0), (3, 0, 0, 0), (4, 0, 0, 0),
                     (4, 0, 0, 0), (4, 0, 0, 0)]  # fmt: skip
    (summary,) = [r for r in runner.store.dump()["stories"] if r["id"] == str(story.story_id)]
    assert (summary["title"], summary["nodes"], summary["saves"], summary["leaf_id"]) == ("灯塔", 8, 1, str(story.leaf))
    cards = {r["name"]: r for r in runner.store.dump()["cards"]}
    moved = [r for r in runner.store.dump()["stories"] if r["card_id"] == cards["改名的卡"]["id"]]
    assert len(moved) == 1 and moved[0]["id"] != str(story.story_id)  # the merged card's story, moved
    deleted = {r["id"] for r in runner.store.dump()["cards"] if r["deleted"]}
    assert len(deleted) == 2  # the deleted card, and the merged one


def test_search_finds_two_character_chinese_words(sqlite_story: StoryBuilder, runner: ProjectionRunner) -> None:
    sqlite_story.turns(2, user="第{i}句", reply="答")
    sqlite_story.user("今天天气很好。")
    runner.catch_up()
    runner.index_search()
    hits = runner.store.search(sqlite_story.story_id, "天气")
    assert [h.node_id for h in hits] == [str(sqlite_story.leaf)]


def test_search_falls_back_to_a_scan_for_a_single_character(
    sqlite_story: StoryBuilder, runner: ProjectionRunner
) -> None:
    sqlite_story.turn("海风很大。", "嗯。")
    runner.catch_up()
    assert [h.kind for h in runner.store.search(sqlite_story.story_id, "海")] == ["user"]


def test_search_matches_english_words_case_insensitively(sqlite_story: StoryBuilder, runner: ProjectionRunner) -> None:
    sqlite_story.turn("The LIGHTHOUSE is dark.", "嗯。")
    runner.catch_up()
    runner.index_search()
    assert len(runner.store.search(sqlite_story.story_id, "lighthouse")) == 1


def test_the_full_text_index_follows_the_folds_when_asked_and_keeps_up_with_revisions(
    sqlite_story: StoryBuilder, runner: ProjectionRunner
) -> None:
    _, reply = sqlite_story.turn("灯塔今晚亮着吗？", "灯塔早就熄了。")
    runner.catch_up()
    # the greeting and the turn: folded, not yet searchable
    assert runner.store.texts_to_index() == 3 and runner.store.search(sqlite_story.story_id, "灯塔") == []
    assert runner.index_search() == 3 and runner.index_search() == 0  # only what changed since
    assert len(runner.store.search(sqlite_story.story_id, "灯塔")) == 2
    sqlite_story.annotate(reply, "revise", "信鸽落在窗台。", "rewrite")
    runner.catch_up()
    assert runner.store.texts_to_index() == 1
    assert runner.index_search() == 1
    assert [h.kind for h in runner.store.search(sqlite_story.story_id, "灯塔")] == ["user"]  # the old words are gone
    assert [h.node_id for h in runner.store.search(sqlite_story.story_id, "信鸽")] == [str(reply)]


def test_the_full_text_index_catches_up_in_bounded_steps(sqlite_story: StoryBuilder, runner: ProjectionRunner) -> None:
    sqlite_story.turns(3, user="第{i}问：信鸽", reply="第{i}答")
    runner.catch_up()
    assert runner.index_search(limit=4) == 4 and runner.store.texts_to_index() == 3  # the greeting and 3 turns
    assert runner.index_search(limit=4) == 3 and runner.store.texts_to_index() == 0
    assert len(runner.store.search(sqlite_story.story_id, "信鸽")) == 3


def test_children_and_ancestry_follow_the_tree(sqlite_story: StoryBuilder, runner: ProjectionRunner) -> None:
    user, first = sqlite_story.turn()
    second = sqlite_story.reply("重新生成。", parent=user)
    runner.catch_up()
    assert [r["id"] for r in runner.store.children(user)] == [str(first), str(second)]
    assert runner.store.is_ancestor(sqlite_story.root_id, second)
    assert not runner.store.is_ancestor(first, second)


def test_path_ids_are_the_path_down_to_the_depth_asked(sqlite_story: StoryBuilder, runner: ProjectionRunner) -> None:
    (u1, r1), (u2, r2) = sqlite_story.turns(2)
    sqlite_story.turn("另一条路", "分支", parent=r1)
    runner.catch_up()
    assert runner.store.path_ids(r2, 0) == {sqlite_story.root_id, u1, r1, u2, r2}
    assert runner.store.path_ids(r2, 2) == {r1, u2, r2}
