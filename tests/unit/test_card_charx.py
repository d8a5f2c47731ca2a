"""CHARX zips: a card.json with the assets it names, and zips that are unsafe, encrypted or too big refused
before they are unpacked."""

from __future__ import annotations

import zipfile

import pytest

from interchange.card_data import CardLimits
from interchange.cards import read_card
from tests.unit.card_files import charx_card, lie_about_size, refused, small_png, zip_of


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
