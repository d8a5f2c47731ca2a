"""A card's memory kept up with its stories, offline: two stories recapped and merged, a deleted story
forgotten (what only it said leaves the handbook), restored and remembered, a story the user asked to
forget kept forgotten, and a sync with nothing new records nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from domain.application import Changji
from domain.values import StorySettings
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from schedulers.workers.compaction import Inline
from service.card_memory import CardMemoryKeeper
from tests.builders import TENANT, a_card, sqlite_app


class World:
    def __init__(self, path: Path) -> None:
        self.app: Changji = sqlite_app(path / "events.sqlite")
        self.store = ReadModels(path / "read_models.sqlite")
        self.runner = ProjectionRunner(self.app, self.store)
        self.memory = CardMemoryKeeper(self.app, self.store, Inline())
        self.card = uuid4()
        self.app.cards.create_card(self.card, TENANT, a_card(), StorySettings(user_name="林舟"))

    def story(self, *turns: tuple[str, str]) -> UUID:
        story_id = uuid4()
        self.app.stories.start_story(story_id, uuid4(), TENANT, self.card, 0, "", {})
        for user, reply in turns:
            self.app.stories.append_node(TENANT, story_id, uuid4(), "user", user)
            self.app.stories.append_node(TENANT, story_id, uuid4(), "reply", reply)
        return story_id

    def sync(self) -> tuple[int, int, int, bool]:
        self.runner.catch_up()
        done = asyncio.run(self.memory.sync(TENANT, self.card))
        return done.recapped, done.forgotten, done.remembered, done.merged


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def handbook_text(world: World) -> str:
    memory = world.app.memory.of(world.card)
    assert memory is not None
    return "\n".join([*(b.text for b in memory.handbook.blocks), memory.resident])


def test_two_stories_recapped_merged_then_one_deleted_restored_and_one_asked_away(world: World) -> None:
    a = world.story(("灯塔的灯还亮着吗？", "亮着，油快用完了。"))
    b = world.story(("渡船什么时候来？", "三天后，雾散了才来。"))
    assert world.sync() == (2, 0, 0, True)
    assert "油快用完了" in handbook_text(world) and "雾散了才来" in handbook_text(world)
    assert world.sync() == (0, 0, 0, False)  # (nothing new: nothing recorded)

    world.app.stories.delete_story(TENANT, a)
    assert world.sync() == (0, 1, 0, True)
    memory = world.app.memory.of(world.card)
    assert memory is not None and memory.handbook.stories == {b} and "油快用完了" not in handbook_text(world)

    world.app.stories.restore_story(TENANT, a)
    assert world.sync() == (0, 0, 1, True)
    assert "油快用完了" in handbook_text(world)

    world.app.memory.forget_story(world.card, b, "asked")
    assert world.sync() == (0, 0, 0, True)  # (b stays forgotten: the user asked)
    memory = world.app.memory.of(world.card)
    assert memory is not None and memory.handbook.stories == {a} and "雾散了才来" not in handbook_text(world)


def test_a_story_played_on_is_recapped_again_and_a_hidden_turn_stays_out(world: World) -> None:
    a = world.story(("灯塔的灯还亮着吗？", "亮着。"))
    world.sync()
    world.app.stories.append_node(TENANT, a, uuid4(), "user", "钥匙在哪里？")
    hidden = world.app.stories.append_node(TENANT, a, uuid4(), "reply", "在门后的钉子上。")
    world.app.nodes.hide_node(TENANT, hidden.node.id)
    assert world.sync() == (1, 0, 0, True)
    memory = world.app.memory.of(world.card)
    assert memory is not None and memory.recaps[a].version == 2
    assert "钥匙在哪里" in memory.recaps[a].text and "钉子" not in memory.recaps[a].text


def test_a_story_asked_away_after_its_deletion_stays_forgotten_when_restored(world: World) -> None:
    a = world.story(("灯塔的灯还亮着吗？", "亮着。"))
    world.story(("渡船什么时候来？", "三天后。"))
    world.sync()
    world.app.stories.delete_story(TENANT, a)
    world.sync()
    world.app.memory.forget_story(world.card, a, "asked")
    world.app.stories.restore_story(TENANT, a)
    assert world.sync()[2] == 0  # (not remembered: the user asked)
    memory = world.app.memory.of(world.card)
    assert memory is not None and a in memory.forgotten and a not in memory.handbook.stories


def test_a_long_newest_reply_is_recapped_from_its_start(world: World) -> None:
    a = world.story(("讲讲灯塔的来历。", "很久以前，" + "灯塔守着北屿。" * 700))
    assert world.sync() == (1, 0, 0, True)
    memory = world.app.memory.of(world.card)
    assert memory is not None and "很久以前" in memory.recaps[a].text and "讲讲灯塔的来历" not in memory.recaps[a].text


def test_a_story_moved_to_the_card_its_card_merged_into_is_recapped_there_too(world: World) -> None:
    a = world.story(("灯塔的灯还亮着吗？", "亮着，油快用完了。"))
    world.story(("渡船什么时候来？", "三天后。"))
    world.sync()
    into = uuid4()
    world.app.cards.create_card(into, TENANT, a_card(), StorySettings(user_name="林舟"))
    world.app.cards.merge_card(TENANT, world.card, into)
    world.app.stories.move_stories(TENANT, [a], world.card, into)
    world.runner.catch_up()
    done = asyncio.run(world.memory.sync(TENANT, into))
    assert (done.recapped, done.merged) == (1, True)
    world.runner.catch_up()  # a recap row of the story in each card's memory: both fold
    rows = world.store.dump()["memory_recaps"]
    assert sorted(r["story_id"] for r in rows).count(str(a)) == 2
    assert world.store.resident_of(into) is not None and "油快用完了" in world.store.resident_of(into)[0]
