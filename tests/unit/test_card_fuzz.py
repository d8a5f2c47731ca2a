"""Fuzzing card reading: whatever the bytes of a PNG, a JSON document or a CHARX zip, reading returns a card
or raises CardFormatError naming a field and a reason, nothing else."""

from __future__ import annotations

import json
import zipfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interchange.card_data import CardFormatError, CardLimits
from interchange.cards import read_card
from tests.unit.card_files import (
    b64,
    charx_card,
    fixture,
    lie_about_size,
    refused,
    small_png,
    v2,
    v3,
    with_ihdr,
    with_text,
    zip_of,
)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read_or_refuse(raw: bytes, limits: CardLimits = CardLimits()) -> None:
    """The fuzz property: a card, or CardFormatError with a field and a reason; never another exception."""
    try:
        read_card(raw, limits)
    except CardFormatError as error:
        assert error.field
        assert error.reason


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
