"""Lorebook files ↔ LoreEntry: SillyTavern's own Eldoria World Info file and Seraphina's embedded book (read from
shared/data at test time, never copied here) read, fire and come back field for field; bad files name the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.card.lore import LoreBookView
from domain.card.rules.lore import activate
from interchange.lorebook_export import character_book_json, lorebook_v3_json, world_info_json
from interchange.lorebook_fields import CARD_ENTRY_FIELDS, LorebookFormatError
from interchange.lorebooks import ImportedLorebook, character_book_entries, read_lorebook
from tests.shared_data import cards_dir

ELDORIA_KEYS = [
    ("eldoria", "wood", "forest", "magical forest"),
    ("shadowfang", "beast", "monster", "monsters", "beasts"),
    ("glade", "safe haven", "refuge"),
    ("power", "magic", "ability"),
]
CORE_WI_FIELDS = ("uid", "key", "keysecondary", "comment", "content", "constant", "selective", "order", "position")


@pytest.fixture(scope="module")
def eldoria() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((cards_dir() / "Eldoria.json").read_text("utf-8"))
    return data


@pytest.fixture(scope="module")
def seraphina() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((cards_dir() / "default_Seraphina.card.json").read_text("utf-8"))
    return data


def test_eldoria_world_info_reads_to_four_entries(eldoria: dict[str, Any]) -> None:
    book = read_lorebook(eldoria, name="Eldoria")
    assert (book.format, book.name) == ("world_info", "Eldoria")
    assert [e.keys for e in book.entries] == ELDORIA_KEYS
    assert [e.uid for e in book.entries] == [0, 1, 2, 3]
    assert all(e.enabled and not e.selective and e.position == "before_char" for e in book.entries)


def test_seraphina_embedded_book_reads_to_four_entries(seraphina: dict[str, Any]) -> None:
    book = character_book_entries(seraphina["data"]["character_book"])
    assert (book.format, book.name) == ("character_book", "Eldoria")
    assert [e.keys for e in book.entries] == ELDORIA_KEYS
    assert book.entries[0].extensions == {"position": 0, "probability": None, "useProbability": False}
    assert read_lorebook(seraphina).entries == book.entries


def test_eldoria_round_trips_field_for_field(eldoria: dict[str, Any]) -> None:
    back = world_info_json(read_lorebook(eldoria))
    assert back.keys() == eldoria.keys()
    for uid, original in eldoria["entries"].items():
        assert back["entries"][uid] == original, uid
    assert back == eldoria


def test_seraphina_book_round_trips(seraphina: dict[str, Any]) -> None:
    original = seraphina["data"]["character_book"]
    back = character_book_json(character_book_entries(original))
    for written, entry in zip(back["entries"], original["entries"], strict=True):
        assert written == entry
    assert back == original


def test_seraphina_book_as_world_info_is_eldoria(seraphina: dict[str, Any], eldoria: dict[str, Any]) -> None:
    converted = world_info_json(character_book_entries(seraphina["data"]["character_book"]))
    assert converted["name"] == "Eldoria"
    for uid, original in eldoria["entries"].items():
        assert {f: converted["entries"][uid][f] for f in CORE_WI_FIELDS} == {f: original[f] for f in CORE_WI_FIELDS}
        assert converted["entries"][uid]["useProbability"] is False


def test_seraphina_book_fires_on_the_forest(seraphina: dict[str, Any]) -> None:
    book = character_book_entries(seraphina["data"]["character_book"])
    view = LoreBookView("seraphina", book.scan, book.entries)
    found = activate([view], ["User: Let us walk into the forest"], char="Seraphina", user="User")
    assert [(h.entry.uid, h.key, h.why) for h in found.hits] == [(0, "forest", "key 'forest'")]


WI_ENTRY: dict[str, Any] = {
    "uid": 12,
    "key": ["lantern"],
    "keysecondary": ["mill", "night"],
    "comment": "The lantern",
    "content": "An old lantern.",
    "constant": False,
    "selective": True,
    "selectiveLogic": 3,
    "order": 40,
    "position": 4,
    "disable": True,
    "caseSensitive": True,
    "matchWholeWords": False,
    "scanDepth": 2,
    "depth": 2,
    "probability": 50,
    "useProbability": True,
    "excludeRecursion": True,
    "extensions": {"chub": {"x": 1}},
}


def test_world_info_fields_map_to_the_entry_and_unknown_ones_are_kept() -> None:
    book = read_lorebook({"entries": {"12": WI_ENTRY}, "name": "Mill", "originalData": {"a": 1}})
    (entry,) = book.entries
    assert (entry.uid, entry.title, entry.keys, entry.secondary_keys) == (
        12,
        "The lantern",
        ("lantern",),
        ("mill", "night"),
    )
    assert (entry.logic, entry.order, entry.position, entry.enabled) == ("and_all", 40, "after_char", False)
    assert (entry.case_sensitive, entry.whole_words, entry.scan_depth) == (True, False, 2)
    assert entry.extensions == {
        "position": 4,
        "depth": 2,
        "probability": 50,
        "useProbability": True,
        "excludeRecursion": True,
        "extensions": {"chub": {"x": 1}},
    }
    assert (book.name, book.extras) == ("Mill", {"originalData": {"a": 1}})
    assert world_info_json(book) == {"entries": {"12": WI_ENTRY}, "name": "Mill", "originalData": {"a": 1}}


def test_world_info_to_character_book_uses_st_extension_names() -> None:
    written = character_book_json(read_lorebook({"entries": {"12": WI_ENTRY}}))["entries"][0]
    assert written["extensions"] == {
        "position": 4,
        "depth": 2,
        "probability": 50,
        "useProbability": True,
        "exclude_recursion": True,
        "chub": {"x": 1},
        "selectiveLogic": 3,
        "match_whole_words": False,
        "scan_depth": 2,
        "case_sensitive": True,
    }
    assert (written["position"], written["enabled"], written["insertion_order"]) == ("after_char", False, 40)


CARD_ENTRY: dict[str, Any] = {
    "id": 3,
    "keys": ["glade"],
    "secondary_keys": ["night"],
    "comment": "",
    "name": "The glade",
    "priority": 5,
    "content": "A safe place.",
    "constant": False,
    "selective": True,
    "insertion_order": 7,
    "enabled": True,
    "position": "after_char",
    "extensions": {
        "position": 1,
        "selectiveLogic": 2,
        "case_sensitive": True,
        "match_whole_words": False,
        "scan_depth": 3,
        "depth": 4,
        "exclude_recursion": True,
        "other_app": [1, 2],
    },
}


def test_card_entry_extensions_are_honoured_and_kept() -> None:
    (entry,) = character_book_entries({"entries": [CARD_ENTRY], "extensions": {}}).entries
    assert (entry.uid, entry.title, entry.logic, entry.order) == (3, "The glade", "not_any", 7)
    assert (entry.position, entry.case_sensitive, entry.whole_words, entry.scan_depth) == ("after_char", True, False, 3)
    assert entry.extensions == {**CARD_ENTRY["extensions"], CARD_ENTRY_FIELDS: {"name": "The glade", "priority": 5}}


def test_a_card_entry_s_extensions_win_over_its_top_level_fields() -> None:
    source = {"position": "before_char", "case_sensitive": False, "extensions": {"position": 1, "case_sensitive": True}}
    (entry,) = character_book_entries({"entries": [source]}).entries
    assert (entry.position, entry.case_sensitive) == ("after_char", True)
    (top_level,) = character_book_entries({"entries": [{"case_sensitive": False}]}).entries
    assert (top_level.position, top_level.case_sensitive) == ("after_char", False)
    assert (
        character_book_json(character_book_entries({"entries": [{"case_sensitive": False}]}))["entries"][0][
            "case_sensitive"
        ]
        is False
    )


def test_card_entry_round_trips_through_both_formats() -> None:
    book = character_book_entries({"entries": [CARD_ENTRY], "description": "d", "token_budget": 500})
    back = character_book_json(book)
    assert back["entries"] == [{**CARD_ENTRY, "comment": "The glade"}]
    assert (back["description"], back["token_budget"]) == ("d", 500)
    wi = world_info_json(book)["entries"]["3"]
    assert (wi["position"], wi["selectiveLogic"], wi["caseSensitive"], wi["excludeRecursion"]) == (1, 2, True, True)
    assert (wi["extensions"], wi["priority"], wi["name"]) == ({"other_app": [1, 2]}, 5, "The glade")
    assert "token_budget" not in world_info_json(book)


def test_book_scan_settings_come_from_the_character_book() -> None:
    book = character_book_entries({"entries": [], "scan_depth": 8, "recursive_scanning": True, "token_budget": 9})
    assert (book.scan.scan_depth, book.scan.recursive, book.extras) == (8, True, {"token_budget": 9})
    assert character_book_json(book) == {"token_budget": 9, "scan_depth": 8, "recursive_scanning": True, "entries": []}
    assert read_lorebook({"entries": {}}).scan == character_book_entries({"entries": []}).scan


def test_lorebook_v3_keeps_use_regex() -> None:
    v3: dict[str, Any] = {
        "spec": "lorebook_v3",
        "data": {
            "name": "Shadows",
            "extensions": {},
            "entries": [
                {"keys": [r"shadow\w+"], "content": "Dark.", "extensions": {}, "enabled": True},
                {"keys": ["glade"], "content": "Safe.", "extensions": {}, "enabled": True},
            ],
        },
    }
    v3["data"]["entries"][0] |= {"insertion_order": 1, "use_regex": True}
    v3["data"]["entries"][1] |= {"insertion_order": 2, "use_regex": False}
    book = read_lorebook(v3)
    assert (book.format, [e.use_regex for e in book.entries]) == ("lorebook_v3", [True, False])
    written = lorebook_v3_json(book)
    assert [e["use_regex"] for e in written["data"]["entries"]] == [True, False]
    assert read_lorebook(written).entries == book.entries
    assert world_info_json(book)["entries"]["0"]["key"] == [r"/shadow\w+/i"]


@pytest.mark.parametrize(
    ("uids", "kept"),
    [
        ([0, 1, 2], [0, 1, 2]),
        ([5, 5, 6], [5, 7, 6]),
        (["a", 0, None], [1, 0, 2]),
        ([-1, 2**60, 1], [0, 2, 1]),
    ],
)
def test_uids_are_the_entries_own_and_unique(uids: list[Any], kept: list[int]) -> None:
    card = {"entries": [{"id": uid, "keys": [], "content": str(i)} for i, uid in enumerate(uids)]}
    assert [e.uid for e in character_book_entries(card).entries] == kept
    world = {"entries": {f"k{i}": {"uid": uid, "content": str(i)} for i, uid in enumerate(uids)}}
    assert [e.uid for e in read_lorebook(world).entries] == kept


def test_a_world_info_entry_without_uid_takes_its_key() -> None:
    assert [e.uid for e in read_lorebook({"entries": {"7": {}, "x": {}}}).entries] == [7, 1]


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ([], "body"),
        ({"entries": 3}, "body.entries"),
        ({"name": "x"}, "body.entries"),
        ({"entries": {"0": []}}, "body.entries.0"),
        ({"entries": {"3": {"key": "forest"}}}, "body.entries.3.key"),
        ({"entries": {"3": {"key": ["a", 1]}}}, "body.entries.3.key"),
        ({"entries": {"0": {"keysecondary": [None]}}}, "body.entries.0.keysecondary"),
        ({"entries": {"0": {"content": 5}}}, "body.entries.0.content"),
        ({"entries": {"0": {"comment": ["x"]}}}, "body.entries.0.comment"),
        ({"entries": {"0": {"order": "100"}}}, "body.entries.0.order"),
        ({"entries": {"0": {"order": True}}}, "body.entries.0.order"),
        ({"entries": {"0": {"order": 1.5}}}, "body.entries.0.order"),
        ({"entries": {"0": {"order": 2**40}}}, "body.entries.0.order"),
        ({"entries": {"0": {"selectiveLogic": 7}}}, "body.entries.0.selectiveLogic"),
        ({"entries": {"0": {"disable": "no"}}}, "body.entries.0.disable"),
        ({"entries": {"0": {"caseSensitive": 1}}}, "body.entries.0.caseSensitive"),
        ({"entries": {"0": {"position": "before"}}}, "body.entries.0.position"),
        ({"entries": {"0": {"scanDepth": -1}}}, "body.entries.0.scanDepth"),
        ({"entries": {"0": {"key": ["k"] * 201}}}, "body.entries.0.key"),
        ({"entries": {"0": {"comment": "x" * 501}}}, "body.entries.0.comment"),
        ({"entries": {"0": {"content": "x" * 100_001}}}, "body.entries.0.content"),
        ({"entries": {str(i): {} for i in range(10_001)}}, "body.entries"),
        ({"entries": [{"keys": "a"}]}, "body.entries.0.keys"),
        ({"entries": [{}, {"insertion_order": None}, {"insertion_order": "1"}]}, "body.entries.2.insertion_order"),
        ({"entries": [{"enabled": "true"}]}, "body.entries.0.enabled"),
        ({"entries": [{"extensions": []}]}, "body.entries.0.extensions"),
        ({"entries": [{"extensions": {"selectiveLogic": "and"}}]}, "body.entries.0.extensions.selectiveLogic"),
        ({"entries": [{"extensions": {"scan_depth": 5000}}]}, "body.entries.0.extensions.scan_depth"),
        ({"entries": [{"extensions": {"position": "0"}}]}, "body.entries.0.extensions.position"),
        ({"entries": [{"position": "middle"}]}, "body.entries.0.position"),
        ({"entries": [{"name": "x" * 501}]}, "body.entries.0.name"),
        ({"entries": [], "scan_depth": "4"}, "body.scan_depth"),
        ({"entries": [], "scan_depth": 1001}, "body.scan_depth"),
        ({"entries": [], "recursive_scanning": 1}, "body.recursive_scanning"),
        ({"entries": [], "name": 3}, "body.name"),
        ({"spec": "lorebook_v3", "data": []}, "body.data"),
        ({"spec": "lorebook_v3", "data": {"entries": [{"use_regex": "yes"}]}}, "body.data.entries.0.use_regex"),
        ({"spec": "chara_card_v2", "data": {"name": "x"}}, "body.data.character_book"),
    ],
)
def test_wrong_types_name_the_field(obj: Any, field: str) -> None:
    with pytest.raises(LorebookFormatError) as caught:
        read_lorebook(obj)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_an_embedded_book_names_the_field_where_it_sits() -> None:
    with pytest.raises(LorebookFormatError) as caught:
        character_book_entries({"entries": [{"keys": [1]}]}, at="body.data.character_book")
    assert caught.value.field == "body.data.character_book.entries.0.keys"


# Properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**54) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
TEXT = st.text(max_size=8)
KEYS = st.lists(TEXT, max_size=3)
FLAG = st.booleans() | st.none()
SMALL = st.integers(-1, 7)
TYPED_EXTENSIONS = st.fixed_dictionaries(
    {},
    optional={
        "selectiveLogic": st.integers(0, 3) | st.none(),
        "case_sensitive": FLAG,
        "match_whole_words": FLAG,
        "scan_depth": st.integers(0, 9) | st.none(),
        "position": st.integers(0, 6) | st.none(),
        "depth": SMALL,
        "exclude_recursion": FLAG,
        "other": JSON,
    },
)
WI_TYPED = st.fixed_dictionaries(
    {},
    optional={
        **dict.fromkeys(["uid", "order", "position", "depth", "probability"], SMALL),
        **dict.fromkeys(["key", "keysecondary"], KEYS),
        **dict.fromkeys(["comment", "content"], TEXT),
        **dict.fromkeys(["constant", "selective", "disable", "caseSensitive", "matchWholeWords"], FLAG),
        "selectiveLogic": st.integers(0, 3),
        "scanDepth": st.integers(0, 9) | st.none(),
        "extensions": JSON,
        "keys": JSON,
    },
)
CARD_TYPED = st.fixed_dictionaries(
    {},
    optional={
        **dict.fromkeys(["id", "insertion_order", "priority"], SMALL),
        **dict.fromkeys(["keys", "secondary_keys"], KEYS),
        **dict.fromkeys(["comment", "name", "content"], TEXT),
        **dict.fromkeys(["constant", "enabled", "selective", "case_sensitive", "use_regex"], FLAG),
        "position": st.sampled_from(["before_char", "after_char"]) | st.none(),
        "extensions": TYPED_EXTENSIONS,
        "uid": JSON,
    },
)
MESSY = st.dictionaries(st.sampled_from([*WI_ENTRY, *CARD_ENTRY, "use_regex", "unknown"]), JSON, max_size=6)
LOREBOOKS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"entries": st.dictionaries(st.sampled_from(["0", "1", "2", "x"]), WI_TYPED | MESSY, max_size=3)},
        optional={"name": TEXT, "extensions": JSON},
    ),
    st.fixed_dictionaries(
        {"entries": st.lists(CARD_TYPED | MESSY, max_size=3)},
        optional={"name": TEXT, "scan_depth": SMALL, "recursive_scanning": FLAG, "extensions": JSON},
    ),
    st.fixed_dictionaries(
        {"spec": st.just("lorebook_v3"), "data": st.fixed_dictionaries({"entries": st.lists(CARD_TYPED)})}
    ),
)


def _export(book: ImportedLorebook) -> dict[str, Any]:
    if book.format == "world_info":
        return world_info_json(book)
    return lorebook_v3_json(book) if book.format == "lorebook_v3" else character_book_json(book)


@settings(max_examples=200, deadline=None)
@given(LOREBOOKS)
def test_reading_raises_only_format_errors_and_exports_read_back_the_same(obj: Any) -> None:
    try:
        book = read_lorebook(obj)
    except LorebookFormatError:
        return
    again = read_lorebook(json.loads(json.dumps(_export(book))))
    assert (again.entries, again.scan, again.format) == (book.entries, book.scan, book.format)
