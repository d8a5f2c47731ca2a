"""SillyTavern's own cards: every shared PNG and JSON export imports whole, its lorebook verbatim, and a
card exported as V2, V3 or PNG reads back field for field, the PNG keeping the art and its other chunks."""

from __future__ import annotations

import base64
import json
import struct
from io import BytesIO
from typing import Any, Literal

import pytest
from PIL import Image

from interchange.card_data import CardFormatError
from interchange.card_export import card_json, card_png
from interchange.cards import read_card
from tests.unit.card_files import (
    art_only,
    b64,
    chunks_of,
    fixture,
    png_of,
    refused,
    v2,
    v3,
    with_text,
    without_added_group_greetings,
)

PNG_CARDS = ("default_Seraphina.png", "default_CodingSensei.png", "default_FluxTheCat.png")


def chara_document(png: bytes) -> dict[str, Any]:
    (text,) = [data[6:] for kind, data in chunks_of(png) if kind == b"tEXt" and data.startswith(b"chara\0")]
    document: dict[str, Any] = json.loads(base64.b64decode(text))
    return document


def pixels(png: bytes) -> bytes:
    with Image.open(BytesIO(png)) as image:
        return image.convert("RGBA").tobytes()


@pytest.mark.parametrize("name", PNG_CARDS)
def test_every_png_card_imports(name: str) -> None:
    card = read_card(fixture(name))
    exported = chara_document(fixture(name))["data"]
    assert (card.spec, card.container) == ("v2", "png")
    assert card.data["name"] == exported["name"]
    assert card.data["first_mes"] == exported["first_mes"]
    assert card.data == exported
    assert card.assets == {}


def test_the_seraphina_json_imports_to_the_data_of_its_png() -> None:
    from_json = read_card(fixture("default_Seraphina.card.json"))
    assert (from_json.spec, from_json.container, from_json.image) == ("v2", "json", None)
    assert from_json.data == read_card(fixture("default_Seraphina.png")).data


def test_the_eldoria_book_survives_verbatim() -> None:
    book = read_card(fixture("default_Seraphina.png")).data["character_book"]
    assert book == json.loads(fixture("default_Seraphina.card.json"))["data"]["character_book"]
    assert book["name"] == "Eldoria"
    assert [entry["keys"][0] for entry in book["entries"]] == ["eldoria", "shadowfang", "glade", "power"]


def test_a_world_info_file_is_refused_as_a_card() -> None:
    error = refused(fixture("Eldoria.json"))
    assert "looks like a World Info lorebook" in error.reason
    assert error.field == "body"


@pytest.mark.parametrize("name", [*PNG_CARDS, "default_Seraphina.card.json"])
@pytest.mark.parametrize("export", ["v2", "v3", "png"])
def test_exports_read_back_field_for_field(name: str, export: Literal["v2", "v3", "png"]) -> None:
    card = read_card(fixture(name))
    written = card_png(card.data, card.image) if export == "png" else card_json(card.data, export)
    again = read_card(written)
    assert again.spec == ("v2" if export == "v2" else "v3")
    assert without_added_group_greetings(again.data) == card.data
    if export != "v2":
        assert again.data["group_only_greetings"] == []
        rewritten = card_json(again.data, "v3")
        assert read_card(rewritten).data == again.data
        assert read_card(card_json(again.data, "v2")).data == again.data  # V3-only fields kept in a V2 export


def test_the_export_envelopes() -> None:
    data = read_card(fixture("default_CodingSensei.png")).data
    envelopes: tuple[tuple[Literal["v2", "v3"], str, str], ...] = (
        ("v2", "chara_card_v2", "2.0"),
        ("v3", "chara_card_v3", "3.0"),
    )
    for spec, name, version in envelopes:
        document = json.loads(card_json(data, spec))
        assert (document["spec"], document["spec_version"], set(document)) == (
            name,
            version,
            {"spec", "spec_version", "data"},
        )
    assert "group_only_greetings" not in json.loads(card_json(data, "v2"))["data"]


def test_a_png_export_carries_chara_then_ccv3_before_iend() -> None:
    card = read_card(fixture("default_CodingSensei.png"))
    chunks = chunks_of(card_png(card.data, card.image))
    keywords = [data.split(b"\0")[0] for kind, data in chunks if kind == b"tEXt"]
    assert keywords == [b"chara", b"ccv3"]
    assert chunks[-1][0] == b"IEND"
    assert chunks[-2][1].startswith(b"ccv3\0")


def test_a_png_export_keeps_the_art_and_its_other_chunks() -> None:
    original = fixture("default_Seraphina.png")
    extra = [
        (b"pHYs", struct.pack(">IIB", 2835, 2835, 1)),
        (b"tEXt", b"Software\0paint"),
        (b"tIME", b"\x07\xe8\x01\x02\x03\x04\x05"),
    ]
    art = art_only(original)
    decorated = png_of([art[0], *extra, *art[1:]])
    card = read_card(with_text(decorated, (b"chara", b64(chara_document(original)))))
    written = card_png(card.data, card.image)
    assert pixels(written) == pixels(original)
    assert art_only(written) == art_only(decorated)
    assert read_card(written).image == card.image
    assert chunks_of(card.image or b"") == art_only(decorated)


def test_the_returned_image_has_no_card_chunks() -> None:
    card = read_card(fixture("default_FluxTheCat.png"))
    assert card.image is not None
    assert chunks_of(card.image) == art_only(fixture("default_FluxTheCat.png"))
    assert pixels(card.image) == pixels(fixture("default_FluxTheCat.png"))


def test_a_png_export_without_art_makes_a_plain_image() -> None:
    card = read_card(card_png({"name": "Ada"}, None))
    assert card.data["name"] == "Ada"
    with Image.open(BytesIO(card.image or b"")) as image:
        assert image.size == (400, 600)


def test_a_png_export_replaces_the_card_chunks_of_its_art() -> None:
    stale = with_text(
        fixture("default_CodingSensei.png"), (b"Chara", b64(v2(name="Old"))), (b"ccv3", b64(v3(name="Old")))
    )
    written = card_png({"name": "New"}, stale)
    assert [data.split(b"\0")[0] for kind, data in chunks_of(written) if kind == b"tEXt"] == [b"chara", b"ccv3"]
    assert read_card(written).data["name"] == "New"
    assert read_card(written).warnings == ()


def test_card_art_that_is_not_a_png_is_refused() -> None:
    with pytest.raises(CardFormatError) as caught:
        card_png({"name": "Ada"}, b"\xff\xd8\xff\xe0 a jpeg")
    assert caught.value.field == "image"
