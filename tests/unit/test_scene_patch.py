"""How the scribe's patch merges into the scene: the rule of each field, names in their known spelling."""

from __future__ import annotations

import json
from functools import reduce
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.tree.rules.scene import ROSTER_CAPS, CharacterState, Roster, SceneSnapshot, apply_patch, canonical_names
from tests.unit.scene_state_support import EMPTY, KNOWN, SCENE, SHEN, patched

NO_ROSTER = Roster()


# time and location


@pytest.mark.parametrize(("key", "value"), [("time", "第三天夜里"), ("location", "码头"), ("time", "")])
def test_text_field_is_replaced_when_given_a_string(key: str, value: str) -> None:
    result = patched({key: value})
    assert result.snapshot.to_dict()[key] == value
    assert result.warnings == []


@pytest.mark.parametrize("value", [3, None, ["码头"], {"name": "码头"}, True])
@pytest.mark.parametrize("key", ["time", "location"])
def test_text_field_is_kept_with_a_warning_when_not_a_string(key: str, value: object) -> None:
    result = patched({key: value})
    assert result.snapshot == SCENE
    assert result.warnings == [f"{key} needs a string; ignored"]


# characters


def test_character_starts_from_defaults_when_new() -> None:
    result = patched({"characters": {"老周": {"status": "守夜"}}})
    assert result.snapshot.characters["老周"] == CharacterState(affinity=0, status="守夜", notes="", at=None)
    assert result.applied == ["characters.老周 updated"]


def test_character_merges_per_field_when_existing() -> None:
    result = patched({"characters": {"沈砚": {"notes": "知道了密码"}}})
    assert result.snapshot.characters["沈砚"] == CharacterState(10, "疲惫", "知道了密码", "灯塔")


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        (15, 15),
        (5.4, 5),
        (5.5, 6),
        (2.5, 3),
        (0.5, 1),
        (-2.5, -2),
        (-2.6, -3),
        (150, 100),
        (-101.7, -100),
        (10**30, 100),
        (-(10**30), -100),
    ],
)
def test_affinity_is_rounded_half_up_and_clamped(given: float, stored: int) -> None:
    result = patched({"characters": {"沈砚": {"affinity": given}}})
    assert result.snapshot.characters["沈砚"].affinity == stored
    assert result.warnings == []


@pytest.mark.parametrize("value", [True, "12", None, float("nan"), float("inf"), [1], {"v": 1}])
def test_affinity_is_kept_with_a_warning_when_not_a_finite_number(value: object) -> None:
    result = patched({"characters": {"沈砚": {"affinity": value, "status": "清醒"}}})
    assert result.snapshot.characters["沈砚"] == CharacterState(10, "清醒", "答应修灯", "灯塔")
    assert result.warnings == ["characters.沈砚.affinity needs a finite number; ignored"]


@pytest.mark.parametrize(("key", "value"), [("status", "清醒"), ("notes", ""), ("at", "码头")])
def test_character_text_field_is_set_when_a_string(key: str, value: str) -> None:
    result = patched({"characters": {"沈砚": {key: value}}})
    assert result.snapshot.characters["沈砚"].to_dict()[key] == value


@pytest.mark.parametrize("value", [1, None, False, ["码头"], {"x": 1}])
@pytest.mark.parametrize("key", ["status", "notes", "at"])
def test_character_text_field_is_kept_with_a_warning_when_not_a_string(key: str, value: object) -> None:
    result = patched({"characters": {"沈砚": {key: value}}})
    assert result.snapshot.characters["沈砚"] == SHEN
    assert result.warnings == [f"characters.沈砚.{key} needs a string; ignored"]


def test_character_unknown_sub_keys_are_ignored_silently() -> None:
    result = patched({"characters": {"沈砚": {"mood": "好", "affinity": 20}}})
    assert result.snapshot.characters["沈砚"].affinity == 20
    assert result.warnings == []


def test_character_is_deleted_when_null() -> None:
    result = patched({"characters": {"沈砚": None}})
    assert "沈砚" not in result.snapshot.characters
    assert result.applied == ["characters.沈砚 removed"]


def test_character_deletion_is_a_silent_no_op_when_absent() -> None:
    result = patched({"characters": {"无名": None}})
    assert result.snapshot.characters == SCENE.characters
    assert (result.applied, result.warnings) == ([], [])


@pytest.mark.parametrize("value", [3, "走了", ["a"], True])
def test_character_is_kept_with_a_warning_when_not_an_object_or_null(value: object) -> None:
    result = patched({"characters": {"沈砚": value}})
    assert result.snapshot.characters["沈砚"] == SHEN
    assert result.warnings == ["characters.沈砚 needs an object or null; ignored"]


@pytest.mark.parametrize("value", [None, [], "沈砚", 1])
def test_characters_are_kept_with_a_warning_when_not_an_object(value: object) -> None:
    result = patched({"characters": value})
    assert result.snapshot == SCENE
    assert result.warnings == ["characters needs an object {name: {...} | null}; ignored"]


@pytest.mark.parametrize("name", ["", "   "])
def test_character_is_refused_when_the_name_is_blank(name: str) -> None:
    result = patched({"characters": {name: {"status": "x"}}})
    assert result.snapshot.characters == SCENE.characters
    assert result.warnings == ["characters: a character needs a non-empty name; ignored"]


# canonical names


@pytest.mark.parametrize(
    ("patch", "known", "expected"),
    [
        ({"alice ": {"a": 1}}, ["Alice"], {"Alice": {"a": 1}}),
        ({" ALICE": None}, ["Alice"], {"Alice": None}),
        ({" 老周 ": {}}, ["Alice"], {"老周": {}}),
        ({"Bob": {"s": 1}, "bob ": {"n": 2}}, [], {"Bob": {"s": 1, "n": 2}}),
        ({"Bob": {"s": 1}, "BOB": {"s": 2}}, [], {"Bob": {"s": 2}}),
        ({"Bob": {"s": 1}, "bob": None}, [], {"Bob": None}),
        ({"alice": {}}, ["Alice", "ALICE"], {"Alice": {}}),
        ({"alice": {}}, ["", "  "], {"alice": {}}),
    ],
    ids=["case", "trim", "new-trimmed", "merge", "later-wins", "null-later", "first-spelling", "blank-known"],
)
def test_canonical_names_match_existing_spellings(
    patch: dict[str, object], known: list[str], expected: dict[str, object]
) -> None:
    assert canonical_names(patch, known) == expected


@pytest.mark.parametrize(
    ("key", "snapshot", "known"),
    [
        ("shen", SceneSnapshot(characters={"Shen": CharacterState()}), []),
        ("  alice", EMPTY, ["Alice"]),
    ],
    ids=["existing-character", "known-name"],
)
def test_apply_patch_writes_to_the_canonical_spelling(key: str, snapshot: SceneSnapshot, known: list[str]) -> None:
    result = apply_patch(snapshot, Roster(), {"characters": {key: {"affinity": 3}}}, known)
    assert [*result.snapshot.characters] == [key.strip().capitalize()]


def test_apply_patch_canonicalizes_against_departed_roster_characters() -> None:
    roster = Roster(characters={"Shen": "清晨"})
    result = apply_patch(EMPTY, roster, {"characters": {"SHEN": {"status": "回来了"}}})
    assert [*result.snapshot.characters] == ["Shen"]


# flags


def test_flag_is_set_when_a_string() -> None:
    assert patched({"flags": {"誓言": "守灯"}}).snapshot.flags == {"天气": "大雾", "誓言": "守灯"}


def test_flag_is_deleted_when_null() -> None:
    result = patched({"flags": {"天气": None}})
    assert result.snapshot.flags == {}
    assert result.applied == ["flags.天气 removed"]


@pytest.mark.parametrize(
    ("value", "stored"),
    [(1, "1"), (1.5, "1.5"), (True, "true"), ([1, "雾"], '[1,"雾"]'), ({"a": {"b": None}}, '{"a":{"b":null}}')],
)
def test_flag_is_json_stringified_when_not_a_string(value: object, stored: str) -> None:
    result = patched({"flags": {"天气": value}})
    assert result.snapshot.flags["天气"] == stored
    assert result.warnings == []


@pytest.mark.parametrize("value", [None, ["天气"], "大雾", 0])
def test_flags_are_kept_with_a_warning_when_not_an_object(value: object) -> None:
    result = patched({"flags": value})
    assert result.snapshot.flags == SCENE.flags
    assert result.warnings == ["flags needs an object {key: string | null}; ignored"]


# inventory and plot threads


@pytest.mark.parametrize("key", ["inventory", "plot_threads"])
@pytest.mark.parametrize("items", [["钥匙", "油灯"], []])
def test_list_is_replaced_whole(key: str, items: list[str]) -> None:
    result = patched({key: items})
    assert result.snapshot.to_dict()[key] == items
    assert result.warnings == []


@pytest.mark.parametrize("value", ["钥匙", None, {"0": "钥匙"}, 3])
@pytest.mark.parametrize("key", ["inventory", "plot_threads"])
def test_list_is_kept_with_a_warning_when_not_an_array(key: str, value: object) -> None:
    result = patched({key: value})
    assert result.snapshot == SCENE
    assert result.warnings == [f"{key} needs a complete array (the whole list is replaced); ignored"]


@pytest.mark.parametrize(
    ("items", "kept", "named"),
    [
        (["钥匙", 3], ["钥匙"], "dropped 1 non-string item(s) (3)"),
        ([{"名": "刀"}, "钥匙", None, [1]], ["钥匙"], 'dropped 3 non-string item(s) ({"名":"刀"}、null)'),
    ],
)
@pytest.mark.parametrize("key", ["inventory", "plot_threads"])
def test_list_drops_non_string_items_and_names_up_to_two(
    key: str, items: list[object], kept: list[str], named: str
) -> None:
    result = patched({key: items})
    assert result.snapshot.to_dict()[key] == kept
    assert result.warnings == [f"{key}: {named}; write each entry as a one-sentence string"]


# unknown keys


@pytest.mark.parametrize("key", ["mood", "Time", "mvu_patch"])
def test_unknown_field_is_refused_with_the_allowed_keys(key: str) -> None:
    result = patched({key: "x"})
    assert result.snapshot == SCENE
    assert result.warnings == [
        f"unknown field {key}; allowed: time, location, characters, inventory, flags, plot_threads"
    ]


def test_unknown_field_warning_lists_roster_when_from_the_user() -> None:
    result = apply_patch(EMPTY, Roster(), {"x": 1}, allow_roster=True)
    assert result.warnings[0].endswith("flags, plot_threads, roster")


# properties

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
names = st.sampled_from(["沈砚", "shen", " Alice ", "alice", "老周", ""]) | st.text(max_size=5)
characters = st.dictionaries(
    names,
    json_values | st.dictionaries(st.sampled_from(["affinity", "status", "notes", "at", "x"]), json_values),
    max_size=4,
)
roster_edits = st.dictionaries(
    st.sampled_from([*ROSTER_CAPS, "people"]), json_values | st.dictionaries(names, json_values), max_size=3
)
patches = st.fixed_dictionaries(
    {},
    optional={
        "time": json_values,
        "location": json_values,
        "characters": json_values | characters,
        "inventory": json_values | st.lists(json_values | names, max_size=5),
        "flags": json_values,
        "plot_threads": json_values | st.lists(names, max_size=5),
        "roster": json_values | roster_edits,
        "other": json_values,
    },
) | st.dictionaries(st.text(max_size=8), json_values, max_size=4)


def fold(sequence: list[dict[str, Any]], allow_roster: bool, via_dicts: bool = False) -> tuple[str, list[str]]:
    def step(acc: tuple[SceneSnapshot, Roster, list[str]], patch: dict[str, Any]) -> Any:
        snapshot, roster, warnings = acc
        if via_dicts:
            snapshot = SceneSnapshot.from_dict(json.loads(json.dumps(snapshot.to_dict())))
            roster = Roster.from_dict(json.loads(json.dumps(roster.to_dict())))
        result = apply_patch(snapshot, roster, patch, KNOWN, allow_roster=allow_roster)
        return result.snapshot, result.roster, warnings + result.warnings

    snapshot, roster, warnings = reduce(step, sequence, (EMPTY, NO_ROSTER, []))
    return json.dumps([snapshot.to_dict(), roster.to_dict()], ensure_ascii=False), warnings


@settings(max_examples=300, deadline=None)
@given(patch=patches, allow_roster=st.booleans())
def test_apply_patch_never_raises_and_warns_in_strings(patch: dict[str, Any], allow_roster: bool) -> None:
    result = apply_patch(SCENE, Roster(), patch, KNOWN, allow_roster=allow_roster)
    assert all(isinstance(w, str) for w in result.warnings)
    assert all(isinstance(a, str) for a in result.applied)
    assert all(-100 <= c.affinity <= 100 and type(c.affinity) is int for c in result.snapshot.characters.values())
    assert all(isinstance(v, str) for v in result.snapshot.flags.values())
    assert all(len(t) <= ROSTER_CAPS[name] for name, t in result.roster.tables().items())
    assert set(result.snapshot.characters) <= set(result.roster.characters)


@settings(max_examples=100, deadline=None)
@given(sequence=st.lists(patches, max_size=6), allow_roster=st.booleans())
def test_folding_patches_is_deterministic_and_survives_serialization(
    sequence: list[dict[str, Any]], allow_roster: bool
) -> None:
    once = fold(sequence, allow_roster)
    assert fold(sequence, allow_roster) == once
    assert fold(sequence, allow_roster, via_dicts=True) == once
