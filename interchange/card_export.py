"""Character cards written without I/O: `card_json` writes V2/V3 card JSON, `card_png` a PNG card carrying both,
and `card_charx` a CHARX zip (the V3 card.json and the card's files at their paths). Each checks `data` as the
readers do, so what they write reads back to the same `data`.
"""

from __future__ import annotations

import base64
import json
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from io import BytesIO
from typing import Any, Literal

from PIL import Image

from interchange.card_data import CardFormatError, CardLimits, check_json_tree, normalised, shortened
from interchange.card_png_chunks import CARD_KEYWORDS, PNG_SIGNATURE, check_image, chunk_role, png_chunks, png_of

ExportSpec = Literal["v2", "v3"]
CHARX_ICON = "assets/icon/images/main.png"  # where a card without files of its own puts its art
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # every member's time: the same card writes the same bytes

ENVELOPES: dict[str, tuple[str, str]] = {"v2": ("chara_card_v2", "2.0"), "v3": ("chara_card_v3", "3.0")}
DEFAULT_ART_SIZE = (400, 600)


def card_json(data: Mapping[str, Any], spec: ExportSpec) -> bytes:
    """The card as UTF-8 JSON in the V2 or V3 envelope; every field of `data` kept (V3-only ones in V2 too)."""
    if spec not in ENVELOPES:
        raise CardFormatError(f"cards are written as v2 or v3, not {shortened(spec)}", "spec")
    name, version = ENVELOPES[spec]
    body = dict(data)
    check_json_tree(body, "data")
    return _json_bytes({"spec": name, "spec_version": version, "data": normalised(body, "data", spec == "v3")})


def card_png(data: Mapping[str, Any], image: bytes | None) -> bytes:
    """The card as a PNG: the art (a plain grey one when None) with tEXt `chara` (V2) and `ccv3` (V3)."""
    v2, v3 = (base64.b64encode(card_json(data, spec)) for spec in ("v2", "v3"))
    art = _default_art() if image is None else image
    if not art.startswith(PNG_SIGNATURE):
        raise CardFormatError("the card art is not a PNG", "image")
    kept = [chunk for chunk in png_chunks(art, "image") if chunk_role(chunk) not in CARD_KEYWORDS]
    check_image(kept, CardLimits(), "image")
    card_chunks = _text_chunk(b"chara", v2) + _text_chunk(b"ccv3", v3)
    return png_of(kept[:-1]) + card_chunks + kept[-1].raw


def _json_bytes(value: Any) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, it reads back the same
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()


def _text_chunk(keyword: bytes, text: bytes) -> bytes:
    body = keyword + b"\0" + text
    return struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(body, zlib.crc32(b"tEXt")))


@lru_cache(maxsize=1)
def _default_art() -> bytes:
    out = BytesIO()
    Image.new("RGB", DEFAULT_ART_SIZE, (128, 128, 128)).save(out, format="PNG")
    return out.getvalue()


def card_charx(data: Mapping[str, Any], image: bytes | None, files: Sequence[tuple[str, bytes]]) -> bytes:
    """The card as a CHARX zip: `card.json` (V3) at the root and `files` (an imported CHARX's, by their zip
    paths: its assets and a RisuAI `module.risum`) as they came. A card with no files of its own and art
    gets its art as the main icon, declared in `data.assets` when the card declares none."""
    body = dict(data)
    if not files and image is not None:
        if not image.startswith(PNG_SIGNATURE):
            raise CardFormatError("the card art is not a PNG", "image")
        files = [(CHARX_ICON, image)]
        if "assets" not in body:
            body["assets"] = [{"type": "icon", "uri": f"embeded://{CHARX_ICON}", "name": "main", "ext": "png"}]
    out = BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path, content in [("card.json", card_json(body, "v3")), *sorted(files)]:
            member = zipfile.ZipInfo(path, ZIP_TIME)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            archive.writestr(member, content)
    return out.getvalue()
