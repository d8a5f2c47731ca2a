"""Character cards in PNG: the chunk walk (whole chunks, CRCs that match, IHDR first, up to IEND), the art checked
against the size limits and by Pillow, the card read from its `ccv3` or `chara` text chunk (tEXt, zTXt or iTXt,
base64) and RisuAI's `chara-ext-asset_*` chunks read as assets. The export builds its PNG on the same chunks.

Decisions where files disagree with themselves:
- `ccv3` wins over `chara`; an unreadable `ccv3` with a readable `chara` falls back to `chara` with a warning.
- Several chunks with one keyword: the last wins (as a reader that overwrites would), with a warning when they
  differ.
- Bytes after IEND are dropped with a warning; RisuAI's asset chunks leave the image and are returned in
  `assets` under their keyword.
- PNGs of more than 100,000 chunks are refused.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from io import BytesIO

from PIL import Image, UnidentifiedImageError

from interchange.card_data import CardFormatError, CardLimits, ImportedCard, ParsedCard, card_from_json, utf8_text

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_KEYWORDS = ("ccv3", "chara")
ASSET_KEYWORD_PREFIX = "chara-ext-asset_"
TEXT_CHUNK_TYPES = frozenset({b"tEXt", b"iTXt", b"zTXt"})
MAX_CHUNK_LENGTH = 2**31 - 1
MAX_PNG_CHUNKS = 100_000  # a real PNG has tens, a large one thousands of IDAT; millions of empty chunks cost seconds

IMAGE_ERRORS = (
    Image.DecompressionBombError, Image.DecompressionBombWarning, UnidentifiedImageError, OSError, SyntaxError,
    ValueError, EOFError, struct.error, zlib.error, IndexError, KeyError,
)  # fmt: skip
BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*")
ASCII_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")


@dataclass(frozen=True, slots=True)
class Chunk:
    kind: bytes
    data: bytes
    raw: bytes  # length, type, data and CRC as they were


def read_png(raw: bytes, limits: CardLimits) -> ImportedCard:
    """A PNG card: its art without the card chunks, the card from `ccv3` or `chara`, and its asset chunks."""
    chunks = png_chunks(raw, "png")
    warnings: list[str] = []
    trailing = len(raw) - len(PNG_SIGNATURE) - sum(len(chunk.raw) for chunk in chunks)
    if trailing:
        warnings.append(f"{trailing} bytes after IEND were dropped")
    art = [chunk for chunk in chunks if chunk_role(chunk) is None]
    check_image(art, limits, "png")
    by_role: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        if (role := chunk_role(chunk)) is not None:
            by_role.setdefault(role, []).append(chunk)
    chosen = {role: _last_of(found, role, warnings) for role, found in by_role.items()}
    card = _card_from_chunks(chosen, limits)
    assets = _png_assets(chosen, limits)
    return ImportedCard(card.data, card.spec, "png", png_of(art), assets, (*warnings, *card.warnings))


def png_chunks(png: bytes, field: str) -> list[Chunk]:
    """The chunks up to IEND, each checked: whole, a CRC that matches, IHDR first."""
    chunks: list[Chunk] = []
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
        chunks.append(Chunk(kind, data, png[at:end]))
        if kind == b"IEND":
            return chunks
        if len(chunks) >= MAX_PNG_CHUNKS:
            raise CardFormatError(f"the PNG has more than {MAX_PNG_CHUNKS} chunks", field)
        at = end


def png_of(chunks: Iterable[Chunk]) -> bytes:
    """A PNG made of these chunks, as they were."""
    return PNG_SIGNATURE + b"".join(chunk.raw for chunk in chunks)


def check_image(chunks: list[Chunk], limits: CardLimits, field: str) -> None:
    """The dimensions in IHDR against the limits first, then Pillow's check of the image's structure."""
    width, height = struct.unpack(">II", chunks[0].data[:8])
    if not width or not height:
        raise CardFormatError(f"the image is {width}x{height} pixels", f"{field}.IHDR")
    if max(width, height) > limits.max_dimension or width * height > limits.max_pixels:
        raise CardFormatError(f"the image is {width}x{height} pixels, over the size limit", f"{field}.IHDR")
    try:
        with Image.open(BytesIO(png_of(chunks)), formats=["PNG"]) as opened:
            opened.verify()
    except IMAGE_ERRORS as error:
        raise CardFormatError(f"the image is broken: {error or type(error).__name__}", field) from None


def chunk_role(chunk: Chunk) -> str | None:
    """What a text chunk is: "chara" or "ccv3" (any case), an asset chunk's keyword, or None (part of the art)."""
    if chunk.kind not in TEXT_CHUNK_TYPES:
        return None
    keyword, separator, _ = chunk.data.partition(b"\0")
    folded = keyword.decode("latin-1").lower()
    if not separator or not (folded in CARD_KEYWORDS or folded.startswith(ASSET_KEYWORD_PREFIX)):
        return None
    return folded if folded in CARD_KEYWORDS else keyword.decode("latin-1")


def _last_of(found: list[Chunk], role: str, warnings: list[str]) -> Chunk:
    distinct = len({(chunk.kind, chunk.data) for chunk in found})
    if distinct > 1:
        warnings.append(f"{'two' if distinct == 2 else distinct} different {role} chunks: the last one was used")
    return found[-1]


def _card_from_chunks(chosen: Mapping[str, Chunk], limits: CardLimits) -> ParsedCard:
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
        return ParsedCard(card.data, card.spec, (note, *card.warnings))


def _card_from_chunk(chunk: Chunk, field: str, limits: CardLimits) -> ParsedCard:
    encoded = _chunk_text(chunk, field, 2 * limits.max_json_bytes + 1024)
    return card_from_json(_unbase64(encoded, field, limits.max_json_bytes), field, limits)


def _png_assets(chosen: Mapping[str, Chunk], limits: CardLimits) -> dict[str, bytes]:
    """RisuAI's embedded assets, by chunk keyword, within the unpacked-size limit."""
    assets: dict[str, bytes] = {}
    budget = limits.max_unpacked_bytes
    for role, chunk in chosen.items():
        if role not in CARD_KEYWORDS:
            field = f"png.{role}"
            assets[role] = _unbase64(_chunk_text(chunk, field, 2 * budget + 1024), field, budget)
            budget -= len(assets[role])
    return assets


def _chunk_text(chunk: Chunk, field: str, limit: int) -> str:
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
    return utf8_text(text, field)


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
