"""A card's memory on the SQLite event store: recaps of two stories merged offline, one story forgotten, the
memory read back whole by another process, and edits made against a stale version refused."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

from domain.application import Changji
from domain.errors import CardNotFoundError, VersionConflictError
from domain.memory.card_memory import CardMemory, Usage
from domain.memory.commands import CardMemoryNotFoundError
from domain.memory.handbook import forget
from domain.memory.offline_merge import offline_merge
from domain.memory.recaps import offline_recap
from domain.values import StorySettings
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from tests.builders import TENANT, a_card, sqlite_app

FREE = Usage()


@pytest.fixture
def played(tmp_path: Path) -> tuple[Changji, Path]:
    path = tmp_path / "events.sqlite"
    return sqlite_app(path), path


def test_recaps_merged_offline_then_one_story_forgotten_read_back_by_another_process(
    played: tuple[Changji, Path],
) -> None:
    app, path = played
    card_id = uuid4()
    a, b = uuid4(), uuid4()
    with pytest.raises(CardMemoryNotFoundError):
        app.memory.record_merge(card_id, offline_merge({}, [], "zh")[0], "", "offline", FREE)
    recaps = {
        a: offline_recap("灯塔", {"人物": "- 沈砚：守塔人", "事实账": "- 渡船每三天一班"}, [], "zh"),
        b: offline_recap("渡船", {"事实账": "- 渡船每三天一班\n- 灯油快用完了"}, [], "zh"),
    }
    for story, text in recaps.items():
        written = app.memory.record_recap(TENANT, card_id, story, text, "f1", (None, None), 2, 0, "offline", FREE)
        assert written.value and written.position > 0
    again = app.memory.record_recap(TENANT, card_id, a, recaps[a], "f1", (None, None), 2, 0, "offline", FREE)
    assert not again.value  # (one recap per fingerprint)
    memory = app.memory.of(card_id)
    assert memory is not None and memory.merge_due
    handbook, resident = offline_merge(recaps, [a, b], "zh")
    assert app.memory.record_merge(card_id, handbook, resident, "offline", FREE, memory.version).value
    app.memory.forget_story(card_id, a, "deleted")
    left, _ = forget(handbook, a)
    merged = app.memory.record_merge(card_id, left, offline_merge({b: recaps[b]}, [b], "zh")[1], "offline", FREE)
    assert merged.value

    other = sqlite_app(path)  # (another process: the memory folded from the store)
    read = other.memory.of(card_id)
    live = app.memory.of(card_id)
    assert isinstance(read, CardMemory) and live is not None and read.version == live.version
    assert read.handbook.stories == {b} and read.forgotten == {a} and not read.merge_due
    assert {i.text: i.sources for i in read.handbook.items}["渡船每三天一班"] == (b,)
    runner = ProjectionRunner(other, ReadModels(path.parent / "read_models.sqlite"))
    assert runner.catch_up() == merged.position  # (the read models pass the memory's events by, for now)


def test_an_edit_against_a_stale_version_is_refused_and_changes_nothing(played: tuple[Changji, Path]) -> None:
    app, _ = played
    card_id, story = uuid4(), uuid4()
    app.cards.create_card(card_id, TENANT, a_card(), StorySettings())
    app.memory.record_recap(TENANT, card_id, story, "# 灯塔\n## 剧情脉络\n风暴夜", "f1", (None, None), 1, 0,
                            "offline", FREE)  # fmt: skip
    version = app.memory.read(TENANT, card_id).version
    app.memory.edit_resident(TENANT, card_id, "用户写的", version)
    with pytest.raises(VersionConflictError):
        app.memory.edit_recap(TENANT, card_id, story, "旧版本上的改动", version)
    memory = app.memory.read(TENANT, card_id)
    assert memory.resident == "用户写的" and memory.recaps[story].text.startswith("# 灯塔")
    with pytest.raises(CardNotFoundError):
        app.memory.read(TENANT, uuid4())  # (no such card: its memory is not there either)
    other_card = uuid4()
    app.cards.create_card(other_card, TENANT, a_card(), StorySettings())
    with pytest.raises(CardMemoryNotFoundError):
        app.memory.read(TENANT, other_card)  # (a card none of whose stories was recapped)
    with pytest.raises(CardNotFoundError):
        app.memory.read("tenant-b", card_id)  # (another tenant's card)
