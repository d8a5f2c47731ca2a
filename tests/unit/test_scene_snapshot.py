"""The scene snapshot itself: who is present, and its plain-dict form."""

from __future__ import annotations

import json

import pytest

from domain.tree.rules.scene import CharacterState, Roster, SceneSnapshot, present
from tests.unit.scene_state_support import SCENE

# presence


@pytest.mark.parametrize(
    ("name", "character", "location", "expected"),
    [
        ("沈砚", CharacterState(at="灯塔"), "灯塔", True),
        (" 沈砚", CharacterState(at="灯塔"), "灯塔", True),
        ("沈砚", CharacterState(at="码头"), "灯塔", False),
        ("沈砚", CharacterState(), "灯塔", False),
        ("沈砚", CharacterState(at=""), "", False),
        ("老周", CharacterState(at="灯塔"), "灯塔", False),
    ],
    ids=["same-place", "trimmed-name", "elsewhere", "no-at", "both-empty", "unknown"],
)
def test_present_when_at_equals_the_location(
    name: str, character: CharacterState, location: str, expected: bool
) -> None:
    snapshot = SceneSnapshot(location=location, characters={"沈砚": character})
    assert present(snapshot, name) is expected


# plain-dict conversion


def test_snapshot_round_trips_through_json() -> None:
    data = json.loads(json.dumps(SCENE.to_dict()))
    assert SceneSnapshot.from_dict(data) == SCENE
    assert "at" not in SceneSnapshot(characters={"a": CharacterState()}).to_dict()["characters"]["a"]


def test_snapshot_from_dict_fills_defaults_when_keys_are_missing() -> None:
    assert SceneSnapshot.from_dict({"time": "夜", "roster": {}}) == SceneSnapshot(time="夜")


def test_roster_round_trips_keeping_insertion_order() -> None:
    roster = Roster(places={"乙": "1", "甲": "2"})
    assert list(Roster.from_dict(json.loads(json.dumps(roster.to_dict()))).places) == ["乙", "甲"]
