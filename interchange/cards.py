"""Character cards as role-play front ends export them (SillyTavern, RisuAI, chub…), read and written
without I/O: bytes in, bytes out.

`read_card` tells the container by its first bytes, never by a file name: the PNG signature is a PNG
card, `PK\\x03\\x04` a CHARX zip, anything else JSON (UTF-8, a BOM tolerated). It returns the card's
V2/V3 `data` object with every field kept verbatim and missing core fields defaulted ("" for strings,
[] for lists, {} for `extensions`, and `group_only_greetings` for V3), the art and the CHARX assets.
Only the shape is checked (types of the core fields, `character_book` an object with an `entries`
list); bad input of any kind raises `CardFormatError` naming the field at fault, and the size limits
are checked before anything is inflated or decoded. `card_json` and `card_png` write V2/V3 JSON and
PNG cards; they check `data` the same way, so what they write reads back to the same `data`.

Decisions where files disagree with themselves:
- V2/V3 with fields at the root (SillyTavern repeats the V1 fields, `tags`, `creator` and
  `creatorcomment` next to `data`, plus legacy keys such as `avatar`, `chat`, `fav`): `data` wins for
  every field it has and the ST mirrors and legacy keys are dropped; a warning names the mirrors that
  differ from `data` (an empty mirror, as ST writes for `tags` and `creator`, is no difference). A root
  key that `data` lacks and that is none of those is kept at the top level of `data`, with a warning.
- V1 / TavernAI: the flat object becomes `data`, unknown root keys kept at its top level; TavernAI's
  oldest names (`char_name`…) become the V1 names unless the V1 name is there too.
- Unknown `spec`: read by its shape (a `data` object: V2; otherwise V1), with a warning.
- PNG: `ccv3` wins over `chara`; an unreadable `ccv3` with a readable `chara` falls back to `chara` with
  a warning. Several chunks with one keyword: the last wins (as a reader that overwrites would), with a
  warning when they differ. Bytes after IEND are dropped with a warning. RisuAI's `chara-ext-asset_*`
  chunks leave the image and are returned in `assets` under their keyword.
- CHARX: `card.json` at the root; every other file is an asset under its zip path; the art is the
  main icon of `data.assets` when it is a readable PNG.
- `character_book: null` is kept as it is (no book); JSON nested deeper than 128 levels and PNGs of
  more than 100,000 chunks are refused.
"""

from __future__ import annotations

import base64
import binascii
import json
import lzma
import math
import re
import struct
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from io import BytesIO
from typing import Any, Literal

from PIL import Image, UnidentifiedImageError

from interchange.json_kinds import kind_of

Spec = Literal["v1", "v2", "v3", "tavernai"]
Container = Literal["json", "png", "charx"]
ExportSpec = Literal["v2", "v3"]


@dataclass(frozen=True, slots=True)
class CardLimits:
    max_bytes: int = 32 * 2**20  # the whole upload
    max_pixels: int = 64_000_000  # decompression-bomb guard (width*height)
    max_dimension: int = 16_384
    max_json_bytes: int = 8 * 2**20  # decoded card JSON
    max_archive_files: int = 2_000  # CHARX
    max_unpacked_bytes: int = 64 * 2**20  # CHARX and compressed PNG chunks, uncompressed sizes declared and read


class CardFormatError(ValueError):
    """A card that cannot be read: `reason` says why, `field` where ("body.data.name", "png.chara")."""

    def __init__(self, reason: str, field: str = "body") -> None:
        super().__init__(f"{field}: {reason}")
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class ImportedCard:
    data: dict[str, Any]
    spec: Spec
    container: Container
    image: bytes | None  # PNG without the card text chunks; None for JSON
    assets: dict[str, bytes]
    warnings: tuple[str, ...]


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"
UTF8_BOM = b"\xef\xbb\xbf"
MAX_JSON_DEPTH = 128
DEFAULT_ART_SIZE = (400, 600)

V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
STRING_FIELDS = (
    *V1_FIELDS, "creator_notes", "system_prompt", "post_history_instructions", "creator", "character_version",
)  # fmt: skip
LIST_FIELDS = ("alternate_greetings", "tags")
V3_LIST_FIELDS = ("group_only_greetings",)
TAVERNAI_FIELDS = {
    "char_name": "name",
    "char_persona": "personality",
    "world_scenario": "scenario",
    "char_greeting": "first_mes",
    "example_dialogue": "mes_example",
}
ST_ROOT_MIRRORS = {  # a root key of SillyTavern's exports: the data field it repeats
    **{field: field for field in (*V1_FIELDS, "tags", "creator")},
    "creatorcomment": "creator_notes",
}
ST_LEGACY_ROOT_KEYS = frozenset({"avatar", "chat", "create_date", "talkativeness", "fav"})
ENVELOPE_KEYS = frozenset({"spec", "spec_version", "data"})
ENVELOPES: dict[str, tuple[str, str]] = {"v2": ("chara_card_v2", "2.0"), "v3": ("chara_card_v3", "3.0")}

CARD_KEYWORDS = ("ccv3", "chara")
ASSET_KEYWORD_PREFIX = "chara-ext-asset_"
TEXT_CHUNK_TYPES = frozenset({b"tEXt", b"iTXt", b"zTXt"})
MAX_CHUNK_LENGTH = 2**31 - 1
MAX_PNG_CHUNKS = 100_000  # a real PNG has tens, a large one thousands of IDAT; millions of empty chunks cost seconds
CHARX_CARD = "card.json"
EMBEDDED_URI = "embeded://"  # sic: the CHARX spelling
READ_CHUNK = 1 << 16

OTHER_FORMATS = (
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"PK\x05\x06", "an empty zip"),
    (b"\x1f\x8b", "a gzip file"),
)
ZIP_ERRORS = (
    zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError, OSError, ValueError,
    struct.error, zlib.error, lzma.LZMAError, KeyError, IndexError, OverflowError,
)  # fmt: skip
IMAGE_ERRORS = (
    Image.DecompressionBombError, Image.DecompressionBombWarning, UnidentifiedImageError, OSError, SyntaxError,
    ValueError, EOFError, struct.error, zlib.error, IndexError, KeyError,
)  # fmt: skip
BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*")
DRIVE_PATH = re.compile(r"[A-Za-z]:")
ASCII_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")


@dataclass(frozen=True, slots=True)
class _Parsed:
    data: dict[str, Any]
    spec: Spec
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Chunk:
    kind: bytes
    data: bytes
    raw: bytes  # length, type, data and CRC as they were


def read_card(raw: bytes, limits: CardLimits = CardLimits()) -> ImportedCard:
    """The card in an upload: a PNG with card text chunks, a CHARX zip or card JSON (V1, V2, V3, TavernAI)."""
    if not raw:
        raise CardFormatError("the upload is empty")
    if len(raw) > limits.max_bytes:
        raise CardFormatError(f"the upload is {len(raw)} bytes, more than the limit of {limits.max_bytes}")
    if raw.startswith(PNG_SIGNATURE):
        return _read_png(raw, limits)
    if raw.startswith(ZIP_SIGNATURE):
        return _read_charx(raw, limits)
    for magic, what in OTHER_FORMATS:
        if raw.startswith(magic):
            raise CardFormatError(f"the upload is {what}; a card is a PNG, a CHARX zip or JSON")
    card = _card_from_json(raw, "body", limits)
    return ImportedCard(card.data, card.spec, "json", None, {}, card.warnings)


def card_json(data: Mapping[str, Any], spec: ExportSpec) -> bytes:
    """The card as UTF-8 JSON in the V2 or V3 envelope; every field of `data` kept (V3-only ones in V2 too)."""
    if spec not in ENVELOPES:
        raise CardFormatError(f"cards are written as v2 or v3, not {_short(spec)}", "spec")
    name, version = ENVELOPES[spec]
    body = dict(data)
    _check_json_tree(body, "data")
    return _json_bytes({"spec": name, "spec_version": version, "data": _normalised(body, "data", spec == "v3")})


def card_png(data: Mapping[str, Any], image: bytes | None) -> bytes:
    """The card as a PNG: the art (a plain grey one when None) with tEXt `chara` (V2) and `ccv3` (V3)."""
    v2, v3 = (base64.b64encode(card_json(data, spec)) for spec in ("v2", "v3"))
    art = _default_art() if image is None else image
    if not art.startswith(PNG_SIGNATURE):
        raise CardFormatError("the card art is not a PNG", "image")
    kept = [chunk for chunk in _png_chunks(art, "image") if _role(chunk) not in CARD_KEYWORDS]
    _check_image(kept, CardLimits(), "image")
    card_chunks = _text_chunk(b"chara", v2) + _text_chunk(b"ccv3", v3)
    return _png_of(kept[:-1]) + card_chunks + kept[-1].raw


# JSON


def _card_from_json(body: bytes, where: str, limits: CardLimits) -> _Parsed:
    return _card_from_document(_json_document(body, where, limits), where)


def _json_document(body: bytes, where: str, limits: CardLimits) -> Any:
    if len(body) > limits.max_json_bytes:
        raise CardFormatError(
            f"the card JSON is {len(body)} bytes, more than the limit of {limits.max_json_bytes}", where
        )
    not_text = "the upload is neither a PNG, a CHARX zip nor UTF-8 JSON" if where == "body" else "the JSON is not UTF-8"
    text = _utf8(body.removeprefix(UTF8_BOM), where, not_text)
    try:
        document = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise CardFormatError(
            f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}", where
        ) from None
    except RecursionError:
        raise CardFormatError(f"the card JSON is nested deeper than {MAX_JSON_DEPTH} levels", where) from None
    except ValueError as error:
        raise CardFormatError(f"the card JSON cannot be read: {error}", where) from None
    _check_json_tree(document, where)
    return document


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_json_tree(value: Any, where: str) -> None:
    """JSON values only, nested at most MAX_JSON_DEPTH deep (walked without recursion)."""
    pending = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            raise CardFormatError(f"the card JSON is nested deeper than {MAX_JSON_DEPTH} levels", where)
        if isinstance(node, dict):
            if not all(isinstance(key, str) for key in node):
                raise CardFormatError("an object has a key that is not a string", where)
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise CardFormatError(f"{node} is not a JSON number", where)
        elif node is not None and not isinstance(node, str | int | float):
            raise CardFormatError(f"a {type(node).__name__} is not a JSON value", where)


def _json_bytes(value: Any) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, it reads back the same
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()


def _card_from_document(document: Any, where: str) -> _Parsed:
    if not isinstance(document, dict):
        raise CardFormatError(f"the card JSON is {kind_of(document)}, not an object", where)
    spec = document.get("spec")
    if "data" in document and not isinstance(document["data"], dict):
        raise CardFormatError(f"data is {kind_of(document['data'])}, not an object", f"{where}.data")
    if spec in ("chara_card_v2", "chara_card_v3") and "data" not in document:
        raise CardFormatError(f"a {spec} card has no data object", f"{where}.data")
    if spec == "chara_card_v3":
        return _from_envelope(document, where, "v3", [_v3_version_warning(document.get("spec_version"))])
    if spec == "chara_card_v2":
        return _from_envelope(document, where, "v2", [_v2_version_warning(document.get("spec_version"))])
    if "data" in document:
        read_as = "no spec" if spec is None else f"unknown spec {_short(spec)}"
        return _from_envelope(document, where, "v2", [f"{read_as}: read as V2 by its data object"])
    warning = None if spec is None else f"unknown spec {_short(spec)}: read as V1, a flat object"
    return _from_flat(document, where, [warning])


def _from_envelope(document: dict[str, Any], where: str, spec: Spec, notes: list[str | None]) -> _Parsed:
    inner = document["data"]
    kept = {key: value for key, value in document.items() if _root_key_kept(key, inner)}
    data = _normalised({**inner, **kept}, f"{where}.data", spec == "v3")
    differing = [key for key, field in ST_ROOT_MIRRORS.items() if _mirror_differs(document, key, data.get(field))]
    if differing:
        notes.append(f"V1 fields at the root differ from data: data wins ({', '.join(differing)})")
    if kept:
        notes.append(f"fields at the root that data lacks were kept in data: {', '.join(kept)}")
    return _Parsed(data, spec, tuple(note for note in notes if note))


def _root_key_kept(key: str, inner: dict[str, Any]) -> bool:
    return (
        key not in inner and key not in ENVELOPE_KEYS and key not in ST_ROOT_MIRRORS and key not in ST_LEGACY_ROOT_KEYS
    )


def _mirror_differs(document: dict[str, Any], key: str, value: Any) -> bool:
    return key in document and document[key] not in ("", [], None) and document[key] != value


def _from_flat(document: dict[str, Any], where: str, notes: list[str | None]) -> _Parsed:
    if "entries" in document and not any(key in document for key in ("name", "char_name", "spec")):
        raise CardFormatError(
            "this looks like a World Info lorebook (it has entries, no card fields), not a card", where
        )
    flat = {key: value for key, value in document.items() if key not in ENVELOPE_KEYS}
    if not any(key in flat for key in TAVERNAI_FIELDS):
        return _Parsed(_normalised(flat, where, False), "v1", tuple(note for note in notes if note))
    data, origins = _tavernai_mapped(flat)
    return _Parsed(_normalised(data, where, False, origins), "tavernai", tuple(note for note in notes if note))


def _tavernai_mapped(flat: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """TavernAI's oldest names mapped to the V1 names (a V1 name that is there too wins), and where each came from."""
    data: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key, value in flat.items():
        target = TAVERNAI_FIELDS.get(key)
        if target is None or target in flat:
            data[key] = value
        else:
            data[target], origins[target] = value, key
    if origins.get("personality") == "char_persona" and "description" not in flat:
        data["description"], origins["description"] = flat["char_persona"], "char_persona"
    return data, origins


def _v2_version_warning(version: Any) -> str | None:
    if version is None or _as_number(version) == 2.0:
        return None
    return f"spec_version {_short(version)} of a chara_card_v2 is not 2.0"


def _v3_version_warning(version: Any) -> str | None:
    number = _as_number(version)
    if number is None:
        return f"spec_version {_short(version)} is not a number: read as 3.0"
    if number == 3.0:
        return None
    if 3.0 < number < 4.0:
        return f"spec_version {_short(version)} is newer than 3.0"
    if number >= 4.0:
        return f"spec_version {_short(version)} is a newer major version than 3.0: read as 3.0, every field kept"
    return f"spec_version {_short(version)} is older than 3.0: read as 3.0"


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _normalised(raw: dict[str, Any], where: str, v3: bool, origins: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The data object with its core fields checked (shape only) and missing ones defaulted."""
    data = dict(raw)

    def at(key: str) -> str:
        return f"{where}.{(origins or {}).get(key, key)}"

    for key in STRING_FIELDS:
        _check_string(data.setdefault(key, ""), key, at(key))
    if not data["name"].strip():
        raise CardFormatError("name is empty" if "name" in raw else "name is missing", at("name"))
    for key in LIST_FIELDS:
        _check_strings(data.setdefault(key, []), key, at(key))
    for key in V3_LIST_FIELDS:
        if v3 or key in data:
            _check_strings(data.setdefault(key, []), key, at(key))
    if not isinstance(data.setdefault("extensions", {}), dict):
        raise CardFormatError(f"extensions is {kind_of(data['extensions'])}, not an object", at("extensions"))
    _check_book_shape(data.get("character_book"), at("character_book"))
    return data


def _check_string(value: Any, key: str, field: str) -> None:
    if not isinstance(value, str):
        raise CardFormatError(f"{key} is {kind_of(value)}, not a string", field)


def _check_strings(value: Any, key: str, field: str) -> None:
    if not isinstance(value, list):
        raise CardFormatError(f"{key} is {kind_of(value)}, not a list of strings", field)
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise CardFormatError(f"{key} holds {kind_of(item)}, not a string", f"{field}[{index}]")


def _check_book_shape(book: Any, field: str) -> None:
    if book is None:
        return
    if not isinstance(book, dict):
        raise CardFormatError(f"character_book is {kind_of(book)}, not an object", field)
    if not isinstance(book.get("entries"), list):
        raise CardFormatError(
            f"character_book entries are {kind_of(book.get('entries'))}, not a list", f"{field}.entries"
        )


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _utf8(body: bytes, field: str, reason: str = "the text is not UTF-8") -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CardFormatError(f"{reason} (byte {error.start})", field) from None


# PNG


def _read_png(raw: bytes, limits: CardLimits) -> ImportedCard:
    chunks = _png_chunks(raw, "png")
    warnings: list[str] = []
    trailing = len(raw) - len(PNG_SIGNATURE) - sum(len(chunk.raw) for chunk in chunks)
    if trailing:
        warnings.append(f"{trailing} bytes after IEND were dropped")
    art = [chunk for chunk in chunks if _role(chunk) is None]
    _check_image(art, limits, "png")
    by_role: dict[str, list[_Chunk]] = {}
    for chunk in chunks:
        if (role := _role(chunk)) is not None:
            by_role.setdefault(role, []).append(chunk)
    chosen = {role: _last_of(found, role, warnings) for role, found in by_role.items()}
    card = _card_from_chunks(chosen, limits)
    assets = _png_assets(chosen, limits)
    return ImportedCard(card.data, card.spec, "png", _png_of(art), assets, (*warnings, *card.warnings))


def _png_chunks(png: bytes, field: str) -> list[_Chunk]:
    """The chunks up to IEND, each checked: whole, a CRC that matches, IHDR first."""
    chunks: list[_Chunk] = []
    at = len(PNG_SIGNATURE)
    while True:
        if at + 8 > len(png):
            raise CardFormatError("the PNG is truncated (it ends before IEND)", field)
        length, kind = struct.unpack_from(">I4s", png, at)
        end = at + 12 + length
        if length > MAX_CHUNK_LENGTH or not kind.isalpha():
            raise CardFormatError(f"the PNG has a broken chunk header at byte {at}", field)
        if end > len(png):
            raise CardFormatError(f"the PNG is truncated (in its {kind.decode()} chunk)", field)
        data = png[at + 8 : end - 4]
        if zlib.crc32(data, zlib.crc32(kind)) != struct.unpack_from(">I", png, end - 4)[0]:
            raise CardFormatError(f"the PNG's {kind.decode()} chunk at byte {at} fails its CRC check", field)
        if not chunks and (kind != b"IHDR" or length != 13):
            raise CardFormatError("the PNG does not start with an IHDR chunk", field)
        chunks.append(_Chunk(kind, data, png[at:end]))
        if kind == b"IEND":
            return chunks
        if len(chunks) >= MAX_PNG_CHUNKS:
            raise CardFormatError(f"the PNG has more than {MAX_PNG_CHUNKS} chunks", field)
        at = end


def _png_of(chunks: Iterable[_Chunk]) -> bytes:
    return PNG_SIGNATURE + b"".join(chunk.raw for chunk in chunks)


def _check_image(chunks: list[_Chunk], limits: CardLimits, field: str) -> None:
    """The dimensions in IHDR against the limits first, then Pillow's check of the image's structure."""
    width, height = struct.unpack(">II", chunks[0].data[:8])
    if not width or not height:
        raise CardFormatError(f"the image is {width}x{height} pixels", f"{field}.IHDR")
    if max(width, height) > limits.max_dimension or width * height > limits.max_pixels:
        raise CardFormatError(f"the image is {width}x{height} pixels, over the size limit", f"{field}.IHDR")
    try:
        with Image.open(BytesIO(_png_of(chunks)), formats=["PNG"]) as opened:
            opened.verify()
    except IMAGE_ERRORS as error:
        raise CardFormatError(f"the image is broken: {error or type(error).__name__}", field) from None


def _role(chunk: _Chunk) -> str | None:
    """What a text chunk is: "chara" or "ccv3" (any case), an asset chunk's keyword, or None (part of the art)."""
    if chunk.kind not in TEXT_CHUNK_TYPES:
        return None
    keyword, separator, _ = chunk.data.partition(b"\0")
    folded = keyword.decode("latin-1").lower()
    if not separator or not (folded in CARD_KEYWORDS or folded.startswith(ASSET_KEYWORD_PREFIX)):
        return None
    return folded if folded in CARD_KEYWORDS else keyword.decode("latin-1")


def _last_of(found: list[_Chunk], role: str, warnings: list[str]) -> _Chunk:
    distinct = len({(chunk.kind, chunk.data) for chunk in found})
    if distinct > 1:
        warnings.append(f"{'two' if distinct == 2 else distinct} different {role} chunks: the last one was used")
    return found[-1]


def _card_from_chunks(chosen: Mapping[str, _Chunk], limits: CardLimits) -> _Parsed:
    """The ccv3 card, or the chara card when there is no ccv3 or it cannot be read."""
    present = [(f"png.{role}", chosen[role]) for role in CARD_KEYWORDS if role in chosen]
    if not present:
        raise CardFormatError("the PNG carries no character card (no chara or ccv3 text chunk)", "png")
    (field, chunk), *fallback = present
    try:
        return _card_from_chunk(chunk, field, limits)
    except CardFormatError as broken:
        if not fallback:
            raise
        try:
            card = _card_from_chunk(fallback[0][1], fallback[0][0], limits)
        except CardFormatError:
            raise broken from None
        note = f"the ccv3 chunk is unreadable ({broken}): the chara chunk was used"
        return _Parsed(card.data, card.spec, (note, *card.warnings))


def _card_from_chunk(chunk: _Chunk, field: str, limits: CardLimits) -> _Parsed:
    encoded = _chunk_text(chunk, field, 2 * limits.max_json_bytes + 1024)
    return _card_from_json(_unbase64(encoded, field, limits.max_json_bytes), field, limits)


def _png_assets(chosen: Mapping[str, _Chunk], limits: CardLimits) -> dict[str, bytes]:
    """RisuAI's embedded assets, by chunk keyword, within the unpacked-size limit."""
    assets: dict[str, bytes] = {}
    budget = limits.max_unpacked_bytes
    for role, chunk in chosen.items():
        if role not in CARD_KEYWORDS:
            field = f"png.{role}"
            assets[role] = _unbase64(_chunk_text(chunk, field, 2 * budget + 1024), field, budget)
            budget -= len(assets[role])
    return assets


def _chunk_text(chunk: _Chunk, field: str, limit: int) -> str:
    """The text of a tEXt (Latin-1), zTXt (deflated Latin-1) or iTXt (UTF-8, maybe deflated) chunk."""
    _, _, rest = chunk.data.partition(b"\0")
    if chunk.kind == b"tEXt":
        return rest.decode("latin-1")
    if chunk.kind == b"zTXt":
        if rest[:1] != b"\0":
            raise CardFormatError("the zTXt chunk has an unknown compression method", field)
        return _inflate(rest[1:], field, limit).decode("latin-1")
    flag, method, tail = rest[:1], rest[1:2], rest[2:].split(b"\0", 2)
    if flag not in (b"\0", b"\1") or method != b"\0" or len(tail) != 3:
        raise CardFormatError("the iTXt chunk is malformed", field)
    text = _inflate(tail[2], field, limit) if flag == b"\1" else tail[2]
    return _utf8(text, field)


def _inflate(data: bytes, field: str, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(data, limit + 1)
    except zlib.error as error:
        raise CardFormatError(f"the compressed text is broken: {error}", field) from None
    if len(text) > limit or inflater.unconsumed_tail:
        raise CardFormatError(f"the compressed text inflates past {limit} bytes", field)
    if not inflater.eof:
        raise CardFormatError("the compressed text is truncated", field)
    return text


def _unbase64(text: str, field: str, limit: int) -> bytes:
    """Standard base64, padded or not, with any whitespace."""
    compact = ASCII_WHITESPACE.sub("", text).rstrip("=")
    if not BASE64_TEXT.fullmatch(compact) or len(compact) % 4 == 1:
        raise CardFormatError("the text is not base64", field)
    if len(compact) * 3 // 4 > limit:
        raise CardFormatError(f"the text decodes to more than {limit} bytes", field)
    try:
        return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError) as error:
        raise CardFormatError(f"the text is not base64: {error}", field) from None


def _text_chunk(keyword: bytes, text: bytes) -> bytes:
    body = keyword + b"\0" + text
    return struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(body, zlib.crc32(b"tEXt")))


@lru_cache(maxsize=1)
def _default_art() -> bytes:
    out = BytesIO()
    Image.new("RGB", DEFAULT_ART_SIZE, (128, 128, 128)).save(out, format="PNG")
    return out.getvalue()


# CHARX


def _read_charx(raw: bytes, limits: CardLimits) -> ImportedCard:
    files = _charx_files(raw, limits)
    if CHARX_CARD not in files:
        raise CardFormatError("the CHARX zip has no card.json at its root", "charx")
    card = _card_from_json(files.pop(CHARX_CARD), f"charx.{CHARX_CARD}", limits)
    warnings = list(card.warnings)
    if card.spec != "v3":
        warnings.append(f"the card.json of a CHARX is {card.spec}, not V3")
    assets = _declared_assets(card.data)
    missing = [uri for uri in (asset["uri"] for asset in assets) if _zip_path(uri) not in (None, *files)]
    warnings += [f"asset {uri} names no file in the zip" for uri in missing]
    image = _charx_icon(assets, files, limits, warnings)
    return ImportedCard(card.data, card.spec, "charx", image, files, tuple(warnings))


def _charx_files(raw: bytes, limits: CardLimits) -> dict[str, bytes]:
    """Every file of the zip by its path, read in bounded pieces and counted against the limits."""
    try:
        with zipfile.ZipFile(BytesIO(raw)) as archive:
            files: dict[str, bytes] = {}
            budget = limits.max_unpacked_bytes
            for member in _checked_members(archive.infolist(), limits):
                cap = min(budget, limits.max_json_bytes) if member.filename == CHARX_CARD else budget
                files[member.filename] = _member_bytes(archive, member, cap)
                budget -= len(files[member.filename])
            return files
    except CardFormatError:
        raise
    except ZIP_ERRORS as error:
        raise CardFormatError(f"the CHARX zip cannot be read: {error or type(error).__name__}", "charx") from None


def _checked_members(members: list[zipfile.ZipInfo], limits: CardLimits) -> list[zipfile.ZipInfo]:
    """The files of the zip (not its folders), after the checks of count, declared size and paths."""
    if len(members) > limits.max_archive_files:
        raise CardFormatError(
            f"the CHARX zip holds {len(members)} entries, more than {limits.max_archive_files}", "charx"
        )
    declared = sum(member.file_size for member in members)
    if declared > limits.max_unpacked_bytes:
        raise CardFormatError(
            f"the CHARX zip unpacks to {declared} bytes, more than {limits.max_unpacked_bytes}", "charx"
        )
    seen: set[str] = set()
    for member in members:
        _check_member(member, seen)
    return [member for member in members if not member.is_dir()]


def _check_member(member: zipfile.ZipInfo, seen: set[str]) -> None:
    name, field = member.filename, f"charx.{member.filename}"
    if "\\" in name or name.startswith("/") or DRIVE_PATH.match(name) or ".." in name.split("/"):
        raise CardFormatError(f"the zip path {_short(name)} is unsafe", field)
    if member.flag_bits & 0x1:
        raise CardFormatError("the zip member is encrypted", field)
    if name in seen:
        raise CardFormatError("the zip holds this path twice", field)
    seen.add(name)


def _member_bytes(archive: zipfile.ZipFile, member: zipfile.ZipInfo, cap: int) -> bytes:
    """A member read in pieces, stopped as soon as it passes its declared size or the cap."""
    field = f"charx.{member.filename}"
    if member.file_size > cap:
        raise CardFormatError(f"the file is {member.file_size} bytes, more than the limit of {cap}", field)
    pieces: list[bytes] = []
    size = 0
    with archive.open(member) as opened:
        while piece := opened.read(READ_CHUNK):
            size += len(piece)
            if size > member.file_size:
                raise CardFormatError(f"the file inflates past its declared size of {member.file_size} bytes", field)
            pieces.append(piece)
    return b"".join(pieces)


def _declared_assets(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    assets = data.get("assets")
    listed = assets if isinstance(assets, list) else []
    return [asset for asset in listed if isinstance(asset, dict) and isinstance(asset.get("uri"), str)]


def _zip_path(uri: str) -> str | None:
    return uri.removeprefix(EMBEDDED_URI) if uri.startswith(EMBEDDED_URI) else None


def _charx_icon(
    assets: list[dict[str, Any]], files: Mapping[str, bytes], limits: CardLimits, warnings: list[str]
) -> bytes | None:
    """The main icon as PNG art (card chunks removed), or None when there is none or it is no readable PNG."""
    icons = sorted(
        (asset for asset in assets if asset.get("type") == "icon"), key=lambda asset: asset.get("name") != "main"
    )
    path = next((path for icon in icons if (path := _zip_path(icon["uri"])) in files), None)
    if path is None:
        return None
    try:
        if not files[path].startswith(PNG_SIGNATURE):
            raise CardFormatError("it is not a PNG", "charx.icon")
        art = [chunk for chunk in _png_chunks(files[path], f"charx.{path}") if _role(chunk) not in CARD_KEYWORDS]
        _check_image(art, limits, f"charx.{path}")
    except CardFormatError as unreadable:
        warnings.append(f"the main icon {path} is left as an asset only: {unreadable.reason}")
        return None
    return _png_of(art)
