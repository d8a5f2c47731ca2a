"""Character card files for the card format tests: SillyTavern's shared cards, PNGs built chunk by chunk,
V2 and V3 documents, CHARX zips, and `refused` for a read that must fail naming a field and a reason."""

from __future__ import annotations

import base64
import json
import struct
import zipfile
import zlib
from functools import cache
from io import BytesIO
from typing import Any

import pytest
from PIL import Image

from interchange.card_data import CardFormatError, CardLimits, ImportedCard
from interchange.cards import read_card
from tests.shared_data import cards_dir

SIGNATURE = b"\x89PNG\r\n\x1a\n"


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


def charx_card(**data: Any) -> bytes:
    return json.dumps(v3(**data)).encode()


def lie_about_size(raw: bytes, declared: int) -> bytes:
    """The last member's uncompressed size set to `declared` in its local header and in the central directory."""
    patched = bytearray(raw)
    for signature, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = patched.rfind(signature)
        patched[at + size_at : at + size_at + 4] = struct.pack("<I", declared)
    return bytes(patched)


def with_ihdr(png: bytes, width: int, height: int) -> bytes:
    chunks = chunks_of(png)
    return png_of([(b"IHDR", struct.pack(">II", width, height) + chunks[0][1][8:]), *chunks[1:]])


def without_added_group_greetings(data: dict[str, Any]) -> dict[str, Any]:
    """A card's data but the empty `group_only_greetings` a V3 writer adds."""
    return {key: value for key, value in data.items() if (key, value) != ("group_only_greetings", [])}
