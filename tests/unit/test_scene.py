"""Scene state: merge rules of the scribe's patch, name canonicalization, the roster, parsing, presence."""

from __future__ import annotations

import json
from functools import reduce
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.tree.rules.scene import (
    ROSTER_CAPS,
    CharacterState,
    PatchResult,
    Roster,
    SceneSnapshot,
    apply_patch,
    canonical_names,
    parse_scribe_output,
    present,
)

EMPTY = SceneSnapshot()
NO_ROSTER = Roster()
KNOWN = ["沈砚", "Alice"]
SHEN = CharacterState(affinity=10, status="疲惫", notes="答应修灯", at="灯塔")
SCENE = SceneSnapshot(
    time="第二天清晨",
    location="灯塔",
    characters={"沈砚": SHEN},
    inventory=("黄铜怀表（User持有）",),
    flags={"天气": "大雾"},
    plot_threads=("灯为何熄灭",),
)


def patched(patch: dict[str, Any], snapshot: SceneSnapshot = SCENE, **kwargs: Any) -> PatchResult:
    return apply_patch(snapshot, Roster(), patch, KNOWN, **kwargs)


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


# unknown keys and user roster edits


@pytest.mark.parametrize("key", ["mood", "Time", "mvu_patch"])
def test_unknown_field_is_refused_with_the_allowed_keys(key: str) -> None:
    result = patched({key: "x"})
    assert result.snapshot == SCENE
    assert result.warnings == [
        f"unknown field {key}; allowed: time, location, characters, inventory, flags, plot_threads"
    ]


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


def test_unknown_field_warning_lists_roster_when_from_the_user() -> None:
    result = apply_patch(EMPTY, Roster(), {"x": 1}, allow_roster=True)
    assert result.warnings[0].endswith("flags, plot_threads, roster")


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


# parsing the scribe's answer


@pytest.mark.parametrize(
    ("text", "patch"),
    [
        ('{"patch": {"time": "夜"}}', {"time": "夜"}),
        ('```json\n{"patch": {"time": "夜"}}\n```', {"time": "夜"}),
        ('```\n{"patch": {"time": "夜"}}\n```', {"time": "夜"}),
        ('好的，账本如下：\n{"patch": {"time": "夜"}}\n以上。', {"time": "夜"}),
        ('说明 ```json\n{"patch": {"location": "港"}}\n``` 完毕 {"patch": {}}', {"location": "港"}),
        ('```json\n{"patch": {"time": "夜"}}', {"time": "夜"}),
        ('{"patch": {"flags": {"暗号": "} 和 {"}}}', {"flags": {"暗号": "} 和 {"}}),
        ('{"patch": {"flags": {"引语": "他说：\\"{\\""}}}', {"flags": {"引语": '他说："{"'}}),
        ('{不是 json} {"patch": {"time": "夜"}}', {"time": "夜"}),
        ('{"patch": {"time": "第一行\n第二行"}}', {"time": "第一行\n第二行"}),
    ],
    ids=[
        "plain",
        "json-fence",
        "bare-fence",
        "prose-around",
        "fence-wins",
        "unclosed-fence",
        "braces-in-strings",
        "escaped-quotes",
        "first-that-parses",
        "raw-newline-in-string",
    ],
)
def test_parse_scribe_output_finds_the_patch(text: str, patch: dict[str, Any]) -> None:
    assert parse_scribe_output(text) == {"patch": patch}


@pytest.mark.parametrize("text", ["", "没有变化。", "{", '{"patch": ', "}{", "[1, 2]", '{"a": 1,}', "{'patch': 1}"])
def test_parse_scribe_output_is_none_when_nothing_parses(text: str) -> None:
    assert parse_scribe_output(text) is None


@pytest.mark.parametrize(
    "text", ['{"patch": []}', '{"patch": "none"}', '{"patch": null}', '{"patch": 3}', '{"changes": {"time": "夜"}}']
)
def test_parse_scribe_output_patch_is_empty_when_not_an_object(text: str) -> None:
    parsed = parse_scribe_output(text)
    assert parsed is not None
    assert parsed["patch"] == {}


def test_parse_scribe_output_takes_an_inner_object_when_the_outer_is_unbalanced() -> None:
    assert parse_scribe_output('{"patch": {"time": "夜"}') == {"time": "夜", "patch": {}}


def test_parse_scribe_output_keeps_other_top_level_keys() -> None:
    assert parse_scribe_output('{"patch": {}, "warnings": ["x"]}') == {"patch": {}, "warnings": ["x"]}


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


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet='{}[]":,\\ abn01`json\n', max_size=60))
def test_parse_scribe_output_never_raises_and_patch_is_an_object(text: str) -> None:
    parsed = parse_scribe_output(text)
    assert parsed is None or isinstance(parsed["patch"], dict)
