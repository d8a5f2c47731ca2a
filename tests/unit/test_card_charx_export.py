"""CHARX out: a CHARX read and written again keeps its card and every file byte for byte (a RisuAI module
included), and writes the same bytes twice; SillyTavern's own cards written as CHARX read back field for field
with their art as the main icon."""

from __future__ import annotations

import zipfile
from io import BytesIO
from typing import Any

import pytest
from PIL import Image

from interchange.card_export import CHARX_ICON, card_charx
from interchange.cards import read_card
from tests.unit.card_files import charx_card, fixture, small_png, without_added_group_greetings, zip_of

SHARED = ("default_Seraphina.png", "default_CodingSensei.png", "default_FluxTheCat.png", "default_Seraphina.card.json")
ASSETS = [
    {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
    {"type": "other", "uri": "embeded://assets/other/audio/hello.wav", "name": "hello", "ext": "wav"},
]


def risu_charx() -> bytes:
    return zip_of(
        {
            "card.json": charx_card(name="Felix Vance", first_mes="灯还亮着。", assets=ASSETS),
            "assets/icon/images/main.png": small_png(),
            "assets/other/audio/hello.wav": b"RIFF\x00\x00\x00\x00WAVE",
            "module.risum": bytes(range(256)) * 4,  # (RisuAI's binary module: kept, never read)
        }
    )


def written(raw: bytes) -> bytes:
    card = read_card(raw)
    return card_charx(card.data, card.image, sorted(card.assets.items()))


def members(raw: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(BytesIO(raw)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_a_charx_written_again_keeps_its_card_and_every_file() -> None:
    original = risu_charx()
    first = read_card(original)
    out = written(original)
    again = read_card(out)
    assert (again.spec, again.container, again.warnings) == ("v3", "charx", ())
    assert again.data == first.data
    assert again.assets == first.assets == {k: v for k, v in members(original).items() if k != "card.json"}
    assert again.image == first.image
    assert written(out) == out  # (the same card writes the same bytes)


def test_the_zip_is_plain_and_safe() -> None:
    with zipfile.ZipFile(BytesIO(written(risu_charx()))) as archive:
        infos = archive.infolist()
        assert archive.testzip() is None
    assert infos[0].filename == "card.json"
    assert all(not info.flag_bits & 1 and ".." not in info.filename.split("/") for info in infos)
    assert {info.date_time for info in infos} == {(1980, 1, 1, 0, 0, 0)}


@pytest.mark.parametrize("name", SHARED)
def test_sillytaverns_cards_as_charx_read_back_field_for_field(name: str) -> None:
    card = read_card(fixture(name))
    out = card_charx(card.data, card.image, [])
    again = read_card(out)
    assert (again.spec, again.container) == ("v3", "charx")
    declared: list[dict[str, Any]] = again.data.pop("assets", [])
    assert without_added_group_greetings(again.data) == card.data  # (V3 adds an empty group_only_greetings)
    if card.image is None:
        assert declared == [] and again.assets == {} and again.image is None
        return
    assert declared == [{"type": "icon", "uri": f"embeded://{CHARX_ICON}", "name": "main", "ext": "png"}]
    assert again.assets == {CHARX_ICON: card.image}
    assert again.image is not None
    with Image.open(BytesIO(again.image)) as back, Image.open(BytesIO(card.image)) as art:
        assert back.convert("RGBA").tobytes() == art.convert("RGBA").tobytes()
