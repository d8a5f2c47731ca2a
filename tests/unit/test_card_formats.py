"""Character cards in and out: SillyTavern's real exports (read from shared data, never copied here), each
format's quirks and the decisions where a file disagrees with itself, round trips field for field, and
fuzzing: whatever the bytes, reading raises CardFormatError or returns a card, nothing else."""

from __future__ import annotations

import base64
import json
import struct
import zipfile
import zlib
from functools import cache
from io import BytesIO
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from interchange.card_data import CardFormatError, CardLimits, ImportedCard
from interchange.card_export import card_json, card_png
from interchange.cards import read_card
from tests.shared_data import cards_dir

PNG_CARDS = ("default_Seraphina.png", "default_CodingSensei.png", "default_FluxTheCat.png")
SIGNATURE = b"\x89PNG\r\n\x1a\n"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@cache
def fixture(name: str) -> bytes:
    return (cards_dir() / name).read_bytes()


def chunks_of(png: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of each chunk up to IEND."""
    chunks, at = [], len(SIGNATURE)
    while True:
        (length,) = struct.unpack_from(">I", png, at)
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        chunks.append((kind, data))
        if kind == b"IEND":
            return chunks
        at += 12 + length


def png_of(chunks: list[tuple[bytes, bytes]]) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return SIGNATURE + b"".join(chunk(kind, data) for kind, data in chunks)


def art_only(png: bytes) -> list[tuple[bytes, bytes]]:
    return [(kind, data) for kind, data in chunks_of(png) if not data.lower().startswith((b"chara\0", b"ccv3\0"))]


def with_text(png: bytes, *texts: tuple[bytes, bytes], kind: bytes = b"tEXt") -> bytes:
    """The art of a card PNG with these (keyword, text) chunks before IEND instead of its card chunks."""
    art = art_only(png)
    return png_of([*art[:-1], *((kind, keyword + b"\0" + text) for keyword, text in texts), art[-1]])


def b64(document: Any) -> bytes:
    return base64.b64encode(json.dumps(document).encode())


def chara_document(png: bytes) -> dict[str, Any]:
    (text,) = [data[6:] for kind, data in chunks_of(png) if kind == b"tEXt" and data.startswith(b"chara\0")]
    document: dict[str, Any] = json.loads(base64.b64decode(text))
    return document


def v2(**data: Any) -> dict[str, Any]:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Ada", **data}}


def v3(**data: Any) -> dict[str, Any]:
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Ada", **data}}


def read_json(document: Any, limits: CardLimits = CardLimits()) -> ImportedCard:
    return read_card(json.dumps(document).encode(), limits)


def refused(raw: bytes, limits: CardLimits = CardLimits()) -> CardFormatError:
    with pytest.raises(CardFormatError) as caught:
        read_card(raw, limits)
    assert caught.value.field
    assert caught.value.reason
    return caught.value


def read_or_refuse(raw: bytes, limits: CardLimits = CardLimits()) -> None:
    """The fuzz property: a card, or CardFormatError with a field and a reason; never another exception."""
    try:
        read_card(raw, limits)
    except CardFormatError as error:
        assert error.field
        assert error.reason


def small_png(size: tuple[int, int] = (4, 6), colour: tuple[int, int, int] = (10, 200, 30)) -> bytes:
    out = BytesIO()
    Image.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


def zip_of(files: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, body in files.items():
            archive.writestr(zipfile.ZipInfo(name), body, compress_type=method)
    return out.getvalue()


def pixels(png: bytes) -> bytes:
    with Image.open(BytesIO(png)) as image:
        return image.convert("RGBA").tobytes()


def without_added_group_greetings(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if (key, value) != ("group_only_greetings", [])}


# SillyTavern's exports


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


# PNG chunks: which one wins


def test_ccv3_wins_over_chara() -> None:
    png = with_text(
        fixture("default_CodingSensei.png"), (b"chara", b64(v2(name="Two"))), (b"ccv3", b64(v3(name="Three")))
    )
    card = read_card(png)
    assert (card.data["name"], card.spec, card.warnings) == ("Three", "v3", ())


def test_a_broken_ccv3_falls_back_to_chara_with_a_warning() -> None:
    png = with_text(fixture("default_CodingSensei.png"), (b"ccv3", b"not base64!"), (b"chara", b64(v2(name="Two"))))
    card = read_card(png)
    assert (card.data["name"], card.spec) == ("Two", "v2")
    assert any("ccv3 chunk is unreadable" in warning and "chara chunk was used" in warning for warning in card.warnings)


def test_a_broken_ccv3_and_a_broken_chara_report_the_ccv3() -> None:
    png = with_text(fixture("default_CodingSensei.png"), (b"ccv3", b"!!"), (b"chara", b"??"))
    assert refused(png).field == "png.ccv3"


def test_of_two_different_chara_chunks_the_last_wins_with_a_warning() -> None:
    png = with_text(
        fixture("default_CodingSensei.png"), (b"chara", b64(v2(name="First"))), (b"chara", b64(v2(name="Last")))
    )
    card = read_card(png)
    assert card.data["name"] == "Last"
    assert "two different chara chunks: the last one was used" in card.warnings


def test_two_identical_chara_chunks_need_no_warning() -> None:
    text = b64(v2(name="Same"))
    card = read_card(with_text(fixture("default_CodingSensei.png"), (b"chara", text), (b"chara", text)))
    assert (card.data["name"], card.warnings) == ("Same", ())


def test_keywords_are_compared_without_case() -> None:
    card = read_card(with_text(fixture("default_CodingSensei.png"), (b"CHARA", b64(v2(name="Loud")))))
    assert card.data["name"] == "Loud"
    assert b"CHARA" not in (card.image or b"")


def test_itxt_and_ztxt_card_chunks_are_read() -> None:
    text = b64(v2(name="Packed"))
    itxt = with_text(fixture("default_CodingSensei.png"), (b"chara", b"\1\0en\0\0" + zlib.compress(text)), kind=b"iTXt")
    ztxt = with_text(fixture("default_CodingSensei.png"), (b"chara", b"\0" + zlib.compress(text)), kind=b"zTXt")
    plain_itxt = with_text(fixture("default_CodingSensei.png"), (b"chara", b"\0\0\0\0" + text), kind=b"iTXt")
    assert [read_card(png).data["name"] for png in (itxt, ztxt, plain_itxt)] == ["Packed"] * 3


def test_a_ztxt_chunk_that_inflates_past_the_limit_is_refused() -> None:
    bomb = b"\0" + zlib.compress(b"A" * 400_000)
    png = with_text(fixture("default_CodingSensei.png"), (b"chara", bomb), kind=b"zTXt")
    error = refused(png, CardLimits(max_json_bytes=100_000))
    assert (error.field, "inflates past" in error.reason) == ("png.chara", True)


def test_base64_without_padding_and_with_newlines_is_read() -> None:
    text = b64(v2(name="Wrapped")).rstrip(b"=")
    assert len(text) % 4
    wrapped = b"\n".join(text[i : i + 76] for i in range(0, len(text), 76)) + b"\r\n"
    assert read_card(with_text(fixture("default_CodingSensei.png"), (b"chara", wrapped))).data["name"] == "Wrapped"


def test_a_png_without_a_card_chunk_is_refused() -> None:
    error = refused(png_of(art_only(fixture("default_CodingSensei.png"))))
    assert error.reason == "the PNG carries no character card (no chara or ccv3 text chunk)"
    assert error.field == "png"


def test_risuai_asset_chunks_become_assets_and_leave_the_image() -> None:
    icon = small_png()
    png = with_text(
        fixture("default_CodingSensei.png"),
        (b"ccv3", b64(v3(assets=[{"type": "icon", "uri": "__asset:0", "name": "main", "ext": "png"}]))),
        (b"chara-ext-asset_:0", base64.b64encode(icon)),
    )
    card = read_card(png)
    assert card.assets == {"chara-ext-asset_:0": icon}
    assert b"chara-ext-asset_" not in (card.image or b"")


def test_bytes_after_iend_are_dropped_with_a_warning() -> None:
    card = read_card(fixture("default_CodingSensei.png") + b"junk")
    assert "4 bytes after IEND were dropped" in card.warnings
    assert card.image == png_of(art_only(fixture("default_CodingSensei.png")))


# JSON: V1, TavernAI, V2 with ST's root mirrors, V3


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


# CHARX


def charx_card(**data: Any) -> bytes:
    return json.dumps(v3(**data)).encode()


def test_a_charx_with_assets() -> None:
    icon, voice = small_png(), b"RIFF....WAVE"
    assets = [
        {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
        {"type": "other", "uri": "embeded://assets/other/audio/hello.wav", "name": "hello", "ext": "wav"},
    ]
    raw = zip_of(
        {
            "card.json": charx_card(assets=assets),
            "assets/icon/images/main.png": icon,
            "assets/other/audio/hello.wav": voice,
        }
    )
    card = read_card(raw)
    assert (card.spec, card.container, card.warnings) == ("v3", "charx", ())
    assert card.data["assets"] == assets
    assert card.assets == {"assets/icon/images/main.png": icon, "assets/other/audio/hello.wav": voice}
    assert card.image == icon


def test_a_charx_asset_missing_from_the_zip_warns() -> None:
    assets = [{"type": "icon", "uri": "embeded://assets/icon/images/gone.png", "name": "main", "ext": "png"}]
    card = read_card(zip_of({"card.json": charx_card(assets=assets)}))
    assert card.image is None
    assert any("gone.png" in warning for warning in card.warnings)


def test_a_charx_without_card_json_is_refused() -> None:
    assert "no card.json" in refused(zip_of({"assets/x.png": small_png()})).reason


@pytest.mark.parametrize("path", ["../evil.txt", "assets/../../evil", "/etc/passwd", "C:/evil", "assets\\evil"])
def test_unsafe_charx_paths_are_refused(path: str) -> None:
    error = refused(zip_of({"card.json": charx_card(), path: b"x"}))
    assert (error.field, "unsafe" in error.reason) == (f"charx.{path}", True)


def test_an_encrypted_charx_member_is_refused() -> None:
    raw = bytearray(zip_of({"card.json": charx_card(), "assets/x": b"secret"}))
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.rfind(signature)
        raw[at + flags_at] |= 1
    error = refused(bytes(raw))
    assert (error.field, "encrypted" in error.reason) == ("charx.assets/x", True)


def lie_about_size(raw: bytes, declared: int) -> bytes:
    """The last member's uncompressed size set to `declared` in its local header and in the central directory."""
    patched = bytearray(raw)
    for signature, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = patched.rfind(signature)
        patched[at + size_at : at + size_at + 4] = struct.pack("<I", declared)
    return bytes(patched)


def test_a_charx_member_that_inflates_past_its_declared_size_is_stopped() -> None:
    raw = lie_about_size(zip_of({"card.json": charx_card(), "assets/bomb.bin": bytes(4_000_000)}), 1000)
    assert refused(raw, CardLimits(max_unpacked_bytes=1_000_000)).field.startswith("charx")


def test_a_charx_whose_declared_sizes_pass_the_limit_is_refused_before_reading() -> None:
    raw = zip_of({"card.json": charx_card(), "assets/a.bin": bytes(600_000), "assets/b.bin": bytes(600_000)})
    assert "unpacks to" in refused(raw, CardLimits(max_unpacked_bytes=1_000_000)).reason


def test_a_charx_with_too_many_members_is_refused() -> None:
    raw = zip_of({"card.json": charx_card(), **{f"assets/other/x{i}.txt": b"x" for i in range(30)}}, zipfile.ZIP_STORED)
    assert "entries" in refused(raw, CardLimits(max_archive_files=20)).reason


def test_a_charx_card_json_over_the_json_limit_is_refused() -> None:
    raw = zip_of({"card.json": charx_card(description="x" * 5000)})
    assert refused(raw, CardLimits(max_json_bytes=1000)).field == "charx.card.json"


# Image limits


def with_ihdr(png: bytes, width: int, height: int) -> bytes:
    chunks = chunks_of(png)
    return png_of([(b"IHDR", struct.pack(">II", width, height) + chunks[0][1][8:]), *chunks[1:]])


def test_dimensions_over_the_limit_are_refused_before_decoding() -> None:
    error = refused(with_ihdr(fixture("default_CodingSensei.png"), 100_000, 100_000))
    assert error.field == "png.IHDR"
    assert refused(fixture("default_CodingSensei.png"), CardLimits(max_pixels=1000)).field == "png.IHDR"


def test_a_png_whose_chunk_fails_its_crc_is_refused() -> None:
    raw = bytearray(fixture("default_CodingSensei.png"))
    raw[100] ^= 0xFF
    assert "CRC" in refused(bytes(raw)).reason


# Fuzzing


def test_every_truncation_of_a_card_png_is_refused() -> None:
    png = fixture("default_CodingSensei.png")
    for length in (*range(0, 64), *range(64, len(png), 1999), *range(len(png) - 40, len(png))):
        refused(png[:length])


@FUZZ
@given(st.data())
def test_flipped_bytes_in_a_card_png(data: st.DataObject) -> None:
    png = bytearray(fixture("default_CodingSensei.png"))
    for at in data.draw(st.sets(st.integers(0, len(png) - 1), min_size=1, max_size=3)):
        png[at] ^= data.draw(st.integers(1, 255))
    refused(bytes(png))  # every byte is under a CRC, or is a length or the signature


@FUZZ
@given(st.data())
def test_flipped_bytes_in_a_card_chunk_with_its_crc_fixed(data: st.DataObject) -> None:
    text = bytearray(b64(v2(alternate_greetings=["a", "b"], extensions={"x": [1, 2]})))
    for _ in range(data.draw(st.integers(1, 4))):
        text[data.draw(st.integers(0, len(text) - 1))] = data.draw(st.integers(0, 255))
    read_or_refuse(with_text(fixture("default_CodingSensei.png"), (b"chara", bytes(text))))


@FUZZ
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_huge_declared_dimensions(width: int, height: int) -> None:
    limits = CardLimits()
    if 0 < width <= limits.max_dimension and 0 < height <= limits.max_dimension and width * height <= limits.max_pixels:
        width = limits.max_dimension + 1
    assert refused(with_ihdr(fixture("default_CodingSensei.png"), width, height)).field == "png.IHDR"


@FUZZ
@given(
    st.text(min_size=1, max_size=200).filter(
        lambda text: any(not (c.isascii() and (c.isalnum() or c in "+/= \n")) for c in text)
    )
)
def test_bad_base64(text: str) -> None:
    png = with_text(fixture("default_CodingSensei.png"), (b"chara", text.encode("latin-1", "replace")))
    assert refused(png).field.startswith("png.chara")


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_after_a_base64_card_prefix(tail: bytes) -> None:
    read_or_refuse(with_text(fixture("default_CodingSensei.png"), (b"chara", b64(v2())[:40] + tail)))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
STRING_FIELDS = (
    "name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes", "system_prompt",
    "post_history_instructions", "creator", "character_version",
)  # fmt: skip
LIST_FIELDS = ("alternate_greetings", "tags", "group_only_greetings")


@st.composite
def wrong_fields(draw: st.DrawFn) -> tuple[str, Any, str]:
    """(field, a value of the wrong type for it, the field path the error must name, below data)."""
    key = draw(st.sampled_from((*STRING_FIELDS, *LIST_FIELDS, "extensions", "character_book")))
    if key in STRING_FIELDS:
        return key, draw(JSON_VALUES.filter(lambda value: not isinstance(value, str))), key
    if key == "extensions":
        return key, draw(JSON_VALUES.filter(lambda value: not isinstance(value, dict))), key
    if key == "character_book":
        entries = draw(JSON_VALUES.filter(lambda value: not isinstance(value, list)))
        if draw(st.booleans()):
            return key, {"entries": entries, "name": "B"}, "character_book.entries"
        return key, draw(JSON_VALUES.filter(lambda value: not isinstance(value, dict | None))), key
    if draw(st.booleans()):
        return key, draw(JSON_VALUES.filter(lambda value: not isinstance(value, list))), key
    items = draw(
        st.lists(JSON_VALUES, min_size=1, max_size=4).filter(lambda items: any(not isinstance(i, str) for i in items))
    )
    return key, items, f"{key}[{next(i for i, item in enumerate(items) if not isinstance(item, str))}]"


@FUZZ
@given(wrong_fields(), st.sampled_from(["v2", "v3", "v1"]))
def test_json_of_wrong_types_names_the_field(wrong: tuple[str, Any, str], shape: str) -> None:
    key, value, path = wrong
    fields = {"name": "Ada", key: value}
    document = fields if shape == "v1" else (v2 if shape == "v2" else v3)(**fields)
    prefix = "body" if shape == "v1" else "body.data"
    assert refused(json.dumps(document).encode()).field == f"{prefix}.{path}"


@FUZZ
@given(JSON_VALUES)
def test_any_json_value_reads_or_is_refused(value: Any) -> None:
    read_or_refuse(json.dumps(value).encode())
    read_or_refuse(json.dumps({"spec": "chara_card_v3", "spec_version": value, "data": value}).encode())


@FUZZ
@given(st.integers(130, 20_000), st.sampled_from(["root", "extensions"]))
def test_deeply_nested_json_is_refused(depth: int, where: str) -> None:
    nested = "[" * depth + "]" * depth
    body = nested if where == "root" else '{"name": "Ada", "extensions": {"deep": ' + nested + "}}"
    assert "nested deeper" in refused(body.encode()).reason


@FUZZ
@given(st.binary(max_size=400), st.sampled_from([b"", b"\x89PNG\r\n\x1a\n", b"PK\x03\x04", b"\xef\xbb\xbf"]))
def test_random_bytes_are_refused(tail: bytes, head: bytes) -> None:
    refused(head + tail)


@FUZZ
@given(st.data())
def test_flipped_bytes_in_a_charx(data: st.DataObject) -> None:
    raw = bytearray(zip_of({"card.json": charx_card(), "assets/icon/images/main.png": small_png()}))
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    read_or_refuse(bytes(raw))


@FUZZ
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]),
)
def test_charx_members_that_lie_about_their_size(declared: int, method: int) -> None:
    raw = zip_of({"card.json": charx_card(), "assets/x.bin": bytes(3000)}, method)
    read_or_refuse(lie_about_size(raw, declared), CardLimits(max_unpacked_bytes=100_000))


@FUZZ
@given(st.lists(st.text(st.sampled_from("a./\\:C"), min_size=1, max_size=8), min_size=1, max_size=5))
def test_charx_paths_are_either_safe_or_refused(paths: list[str]) -> None:
    read_or_refuse(zip_of({"card.json": charx_card(), **{path: b"x" for path in paths}}))
