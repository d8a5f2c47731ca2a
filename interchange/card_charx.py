"""Character cards in CHARX zips: `card.json` at the root is the card, every other file an asset under its zip
path, and the art the main icon of `data.assets` when it is a readable PNG. The zip is checked before anything is
inflated (entry count, declared sizes, safe paths, no encryption, no path twice) and read in bounded pieces.
"""

from __future__ import annotations

import lzma
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping
from io import BytesIO
from typing import Any

from interchange.card_data import CardFormatError, CardLimits, ImportedCard, card_from_json, shortened
from interchange.card_png_chunks import CARD_KEYWORDS, PNG_SIGNATURE, check_image, chunk_role, png_chunks, png_of

ZIP_SIGNATURE = b"PK\x03\x04"
CHARX_CARD = "card.json"
EMBEDDED_URI = "embeded://"  # sic: the CHARX spelling
READ_CHUNK = 1 << 16

ZIP_ERRORS = (
    zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError, OSError, ValueError,
    struct.error, zlib.error, lzma.LZMAError, KeyError, IndexError, OverflowError,
)  # fmt: skip
DRIVE_PATH = re.compile(r"[A-Za-z]:")


def read_charx(raw: bytes, limits: CardLimits) -> ImportedCard:
    """A CHARX card: the card from `card.json`, every other file as an asset and the main icon as its art."""
    files = _charx_files(raw, limits)
    if CHARX_CARD not in files:
        raise CardFormatError("the CHARX zip has no card.json at its root", "charx")
    card = card_from_json(files.pop(CHARX_CARD), f"charx.{CHARX_CARD}", limits)
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
        raise CardFormatError(f"the zip path {shortened(name)} is unsafe", field)
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
        art = [chunk for chunk in png_chunks(files[path], f"charx.{path}") if chunk_role(chunk) not in CARD_KEYWORDS]
        check_image(art, limits, f"charx.{path}")
    except CardFormatError as unreadable:
        warnings.append(f"the main icon {path} is left as an asset only: {unreadable.reason}")
        return None
    return png_of(art)
