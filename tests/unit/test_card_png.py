"""Card PNGs chunk by chunk: which card chunk wins when a file carries several, the text chunk forms and
encodings that are read, RisuAI's asset chunks, and the image limits checked before any decoding."""

from __future__ import annotations

import base64
import zlib

from interchange.card_data import CardLimits
from interchange.cards import read_card
from tests.unit.card_files import (
    art_only,
    b64,
    fixture,
    png_of,
    refused,
    small_png,
    v2,
    v3,
    with_ihdr,
    with_text,
)


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


# Image limits


def test_dimensions_over_the_limit_are_refused_before_decoding() -> None:
    error = refused(with_ihdr(fixture("default_CodingSensei.png"), 100_000, 100_000))
    assert error.field == "png.IHDR"
    assert refused(fixture("default_CodingSensei.png"), CardLimits(max_pixels=1000)).field == "png.IHDR"


def test_a_png_whose_chunk_fails_its_crc_is_refused() -> None:
    raw = bytearray(fixture("default_CodingSensei.png"))
    raw[100] ^= 0xFF
    assert "CRC" in refused(bytes(raw)).reason
