"""Card JSON: V1, TavernAI, V2 with SillyTavern's root mirrors and V3 read to one card data, and a document
of the wrong shape or type, or an upload that is no card at all, refused naming the field at fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interchange.card_data import CardFormatError, CardLimits
from interchange.card_export import card_json
from interchange.cards import read_card
from tests.unit.card_files import fixture, read_json, refused, v2, v3


def test_root_mirrors_that_differ_lose_to_data_with_a_warning() -> None:
    document = {
        **v2(description="from data", tags=["a"]),
        "name": "Root",
        "description": "from root",
        "creatorcomment": "",
        "avatar": "none",
        "fav": False,
        "chat": "Ada - 2024",
    }
    card = read_json(document)
    assert (card.data["name"], card.data["description"]) == ("Ada", "from data")
    assert not {"avatar", "fav", "chat", "creatorcomment"} & set(card.data)
    (warning,) = card.warnings
    assert warning.startswith("V1 fields at the root differ from data: data wins")
    assert "name" in warning and "description" in warning


def test_a_root_field_that_data_lacks_and_st_never_writes_is_kept_in_data() -> None:
    card = read_json({**v2(), "world_id": 7, "tags": ["mirror only"]})
    assert card.data["world_id"] == 7
    assert card.data["tags"] == []
    assert any("world_id" in warning for warning in card.warnings)


def test_the_oldest_tavernai_format() -> None:
    document = {
        "char_name": "Old Ada",
        "char_persona": "curious",
        "world_scenario": "a lab",
        "char_greeting": "Hello.",
        "example_dialogue": "<START>",
        "custom": {"x": 1},
    }
    card = read_json(document)
    assert card.spec == "tavernai"
    expected = {"name": "Old Ada", "personality": "curious", "description": "curious", "scenario": "a lab"}
    assert {key: card.data[key] for key in expected} == expected
    assert (card.data["first_mes"], card.data["mes_example"], card.data["custom"]) == ("Hello.", "<START>", {"x": 1})
    assert "char_name" not in card.data
    assert read_card(card_json(card.data, "v2")).data == card.data


def test_a_tavernai_name_of_the_wrong_type_is_reported_where_it_was() -> None:
    assert refused(json.dumps({"char_name": 5}).encode()).field == "body.char_name"


def test_a_flat_v1_card_keeps_unknown_keys_at_the_top_of_data() -> None:
    document = {"name": "Ada", "description": "d", "first_mes": "Hi", "talkativeness": "0.5", "custom": [1, 2]}
    card = read_json(document)
    assert card.spec == "v1"
    assert (card.data["talkativeness"], card.data["custom"], card.data["first_mes"]) == ("0.5", [1, 2], "Hi")
    assert (card.data["scenario"], card.data["tags"], card.data["extensions"]) == ("", [], {})
    assert "group_only_greetings" not in card.data
    assert read_card(card_json(card.data, "v2")).data == card.data


def test_v3_fields_are_kept_verbatim() -> None:
    book = {"name": "B", "entries": [{"keys": ["k"], "content": "c", "use_regex": True, "extensions": {}}]}
    v3_only = {
        "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
        "nickname": "A",
        "creator_notes_multilingual": {"zh": "说明"},
        "source": ["https://example.org"],
        "group_only_greetings": ["Hi all"],
        "creation_date": 1700000000,
        "modification_date": 1700000001,
    }
    card = read_json(v3(character_book=book, **v3_only))
    assert (card.spec, card.warnings) == ("v3", ())
    assert card.data["character_book"] == book
    assert {key: card.data[key] for key in v3_only} == v3_only
    assert read_card(card_json(card.data, "v2")).data == card.data


def test_a_v3_card_without_group_greetings_gets_them_empty() -> None:
    assert read_json(v3()).data["group_only_greetings"] == []


@pytest.mark.parametrize(("version", "words"), [("3.5", "newer than 3.0"), (4, "newer major"), ("x", "not a number")])
def test_a_v3_spec_version_other_than_3_0_warns_and_still_imports(version: Any, words: str) -> None:
    card = read_json({**v3(nickname="n"), "spec_version": version})
    assert (card.spec, card.data["nickname"]) == ("v3", "n")
    assert any(words in warning for warning in card.warnings)


def test_spec_version_3_5_says_so() -> None:
    assert read_json({**v3(), "spec_version": "3.5"}).warnings == ("spec_version 3.5 is newer than 3.0",)


def test_an_unknown_spec_is_read_by_its_shape_with_a_warning() -> None:
    wrapped = read_json({"spec": "chara_card_v9", "data": {"name": "Ada"}})
    flat = read_json({"spec": "mystery", "name": "Flat"})
    assert (wrapped.spec, flat.spec, flat.data["name"]) == ("v2", "v1", "Flat")
    assert "spec" not in flat.data
    assert all(any("unknown spec" in warning for warning in card.warnings) for card in (wrapped, flat))


def test_json_with_a_bom_is_read() -> None:
    assert read_card(b"\xef\xbb\xbf" + json.dumps(v2()).encode()).data["name"] == "Ada"


def test_a_lone_surrogate_survives_the_round_trip() -> None:
    card = read_card(b'{"name": "Ada", "description": "\\ud800 broken"}')
    assert read_card(card_json(card.data, "v3")).data["description"] == "\ud800 broken"


def test_a_null_character_book_is_kept() -> None:
    assert read_json(v2(character_book=None)).data["character_book"] is None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": ""}, "body.data.name"),
        ({"name": "  "}, "body.data.name"),
        ({"description": 3}, "body.data.description"),
        ({"alternate_greetings": "hi"}, "body.data.alternate_greetings"),
        ({"alternate_greetings": ["a", "b", 3]}, "body.data.alternate_greetings[2]"),
        ({"tags": [None]}, "body.data.tags[0]"),
        ({"group_only_greetings": {}}, "body.data.group_only_greetings"),
        ({"extensions": []}, "body.data.extensions"),
        ({"character_book": []}, "body.data.character_book"),
        ({"character_book": {"entries": {"0": {}}}}, "body.data.character_book.entries"),
    ],
)
def test_wrong_types_name_the_field_at_fault(data: dict[str, Any], field: str) -> None:
    assert refused(json.dumps(v2(**data)).encode()).field == field


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"spec": "chara_card_v2", "data": "x"}, "body.data"),
        ({"spec": "chara_card_v2", "data": {}}, "body.data.name"),
        ({"description": "no name"}, "body.name"),
        ([v2()], "body"),
        ("card", "body"),
    ],
)
def test_documents_of_the_wrong_shape_are_refused(document: Any, field: str) -> None:
    assert refused(json.dumps(document).encode()).field == field


def test_card_json_refuses_data_it_could_not_read_back() -> None:
    for data, field in (
        ({"name": 5}, "data.name"),
        ({"name": "A", "x": {1, 2}}, "data"),
        ({"name": "A", "x": float("nan")}, "data"),
    ):
        with pytest.raises(CardFormatError) as caught:
            card_json(data, "v2")
        assert caught.value.field == field


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "empty"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "JPEG"),
        (b"\x80\x81 not text", "neither a PNG, a CHARX zip nor UTF-8 JSON"),
        (b"name: Ada", "not valid JSON"),
        (b'{"name": "Ada", "x": NaN}', "NaN"),
    ],
)
def test_uploads_that_are_no_card_say_why(raw: bytes, words: str) -> None:
    assert words in refused(raw).reason


def test_the_upload_size_limit() -> None:
    assert "more than the limit" in refused(fixture("default_CodingSensei.png"), CardLimits(max_bytes=1000)).reason


def test_the_json_size_limit() -> None:
    assert refused(json.dumps(v2(description="x" * 2000)).encode(), CardLimits(max_json_bytes=1000)).field == "body"
