"""The scene's roster: edits by the user only, everything on stage registered at its time, each table capped."""

from __future__ import annotations

from typing import Any

import pytest

from domain.tree.rules.scene import ROSTER_CAPS, CharacterState, Roster, SceneSnapshot, apply_patch
from tests.unit.scene_state_support import EMPTY, SCENE, patched

# user roster edits


def test_roster_edit_is_refused_when_not_from_the_user() -> None:
    result = patched({"roster": {"places": {"密室": "昨夜"}}})
    assert "密室" not in result.roster.places
    assert result.warnings == ["roster is edited by the user only; ignored"]


@pytest.mark.parametrize(
    ("edit", "before", "after"),
    [
        ({"places": {"密室": "昨夜"}}, {}, {"密室": "昨夜"}),
        ({"places": {" 密室 ": "x" * 80}}, {}, {"密室": "x" * 60}),
        ({"places": {"密室": "今晨"}}, {"密室": "昨夜", "港口": ""}, {"密室": "今晨", "港口": ""}),
        ({"places": {"密室": None}}, {"密室": "昨夜"}, {}),
    ],
    ids=["add", "truncate", "change-time-in-place", "delete-inactive"],
)
def test_roster_edit_is_applied_when_from_the_user(
    edit: dict[str, Any], before: dict[str, str], after: dict[str, str]
) -> None:
    result = apply_patch(EMPTY, Roster(places=before), {"roster": edit}, allow_roster=True)
    assert result.roster.places == after
    assert result.warnings == []


def test_roster_deletion_is_undone_when_the_entry_is_still_on_stage() -> None:
    roster = Roster(characters={"沈砚": "第一天", "老周": "第一天"})
    result = apply_patch(SCENE, roster, {"roster": {"characters": {"沈砚": None}}}, allow_roster=True)
    assert list(result.roster.characters.items()) == [("老周", "第一天"), ("沈砚", "第二天清晨")]


@pytest.mark.parametrize(
    ("edit", "warning"),
    [
        ({"people": {"a": "b"}}, "roster.people: unknown table; allowed: characters, places, items, events"),
        ({"places": ["密室"]}, "roster.places needs an object {name: time | null}; ignored"),
        ({"places": {"密室": 3}}, "roster.places.密室 needs a string time or null; ignored"),
        ({"places": {" ": "昨夜"}}, "roster.places: an entry needs a non-empty name; ignored"),
    ],
)
def test_roster_edit_is_refused_with_a_warning_when_malformed(edit: dict[str, Any], warning: str) -> None:
    result = apply_patch(EMPTY, Roster(), {"roster": edit}, allow_roster=True)
    assert result.roster == Roster()
    assert result.warnings == [warning]


def test_roster_edit_is_refused_when_not_an_object() -> None:
    result = apply_patch(EMPTY, Roster(), {"roster": ["x"]}, allow_roster=True)
    assert result.warnings == ["roster needs an object {table: {name: time | null}}; ignored"]


# roster registration and caps


def test_registration_adds_everything_on_stage_at_the_current_time() -> None:
    snapshot = SceneSnapshot(
        time="第二天清晨",
        location="灯塔",
        characters={"沈砚": CharacterState(at="码头"), "老周": CharacterState(at="灯塔"), "阿青": CharacterState()},
        inventory=("钥匙",),
        plot_threads=("灯为何熄灭",),
    )
    roster = apply_patch(snapshot, Roster(), {}).roster
    assert roster.to_dict() == {
        "characters": {"沈砚": "第二天清晨", "老周": "第二天清晨", "阿青": "第二天清晨"},
        "places": {"灯塔": "第二天清晨", "码头": "第二天清晨"},
        "items": {"钥匙": "第二天清晨"},
        "events": {"灯为何熄灭": "第二天清晨"},
    }


@pytest.mark.parametrize(("time", "stored"), [("", ""), ("雨" * 45, "雨" * 30)])
def test_registration_time_is_truncated_to_thirty_chars(time: str, stored: str) -> None:
    roster = apply_patch(SceneSnapshot(time=time, location="灯塔"), Roster(), {}).roster
    assert roster.places == {"灯塔": stored}


def test_registration_keeps_first_appearance_and_departed_entries() -> None:
    first = apply_patch(SCENE, Roster(), {})
    later = apply_patch(
        first.snapshot, first.roster, {"time": "第五天", "characters": {"沈砚": None, "老周": {}}, "inventory": []}
    )
    assert later.roster.characters == {"沈砚": "第二天清晨", "老周": "第五天"}
    assert later.roster.items == {"黄铜怀表（User持有）": "第二天清晨"}


def test_registration_skips_blank_names() -> None:
    roster = apply_patch(SceneSnapshot(inventory=("", " "), plot_threads=("",)), Roster(), {}).roster
    assert roster == Roster()


@pytest.mark.parametrize("table", ["characters", "places", "items", "events"])
def test_roster_table_drops_oldest_when_over_its_cap(table: str) -> None:
    cap = ROSTER_CAPS[table]
    roster = Roster.from_dict({table: {f"旧{i}": "" for i in range(cap)}})
    snapshot = {
        "characters": SceneSnapshot(characters={f"新{i}": CharacterState() for i in range(3)}),
        "places": SceneSnapshot(characters={f"新{i}": CharacterState(at=f"新{i}") for i in range(3)}),
        "items": SceneSnapshot(inventory=tuple(f"新{i}" for i in range(3))),
        "events": SceneSnapshot(plot_threads=tuple(f"新{i}" for i in range(3))),
    }[table]
    entries = list(apply_patch(snapshot, roster, {}).roster.tables()[table])
    assert len(entries) == cap
    assert entries[:1] == ["旧3"]
    assert entries[-3:] == ["新0", "新1", "新2"]


@pytest.mark.parametrize(("table", "cap"), [("characters", 100), ("items", 100), ("events", 60), ("places", 60)])
def test_roster_caps_follow_the_reference(table: str, cap: int) -> None:
    assert ROSTER_CAPS[table] == cap


def test_roster_cap_applies_to_user_edits() -> None:
    edit = {"roster": {"events": {f"线{i}": "" for i in range(70)}}}
    result = apply_patch(EMPTY, Roster(), edit, allow_roster=True)
    assert list(result.roster.events) == [f"线{i}" for i in range(10, 70)]
