"""A character card's `data` object read from card JSON, and what every card container shares: the limits of an
upload (`CardLimits`), the error of a card that cannot be read (`CardFormatError`) and what reading one gives
(`ImportedCard`).

`card_from_json` decodes card JSON (UTF-8, a BOM tolerated; JSON values only, nested at most 128 levels) and maps
its envelope to one V2/V3 `data` object with every field kept verbatim and missing core fields defaulted (""
for strings, [] for lists, {} for `extensions`, and `group_only_greetings` for V3). Only the shape is checked
(types of the core fields, `character_book` an object with an `entries` list); bad input raises
`CardFormatError` naming the field at fault. `normalised` is that check and defaulting, which the export applies
too, so what it writes reads back to the same `data`.

Decisions where files disagree with themselves:
- V2/V3 with fields at the root (SillyTavern repeats the V1 fields, `tags`, `creator` and
  `creatorcomment` next to `data`, plus legacy keys such as `avatar`, `chat`, `fav`): `data` wins for
  every field it has and the ST mirrors and legacy keys are dropped; a warning names the mirrors that
  differ from `data` (an empty mirror, as ST writes for `tags` and `creator`, is no difference). A root
  key that `data` lacks and that is none of those is kept at the top level of `data`, with a warning.
- V1 / TavernAI: the flat object becomes `data`, unknown root keys kept at its top level; TavernAI's
  oldest names (`char_name`…) become the V1 names unless the V1 name is there too.
- Unknown `spec`: read by its shape (a `data` object: V2; otherwise V1), with a warning.
- `character_book: null` is kept as it is (no book).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from interchange.json_kinds import kind_of

Spec = Literal["v1", "v2", "v3", "tavernai"]
Container = Literal["json", "png", "charx"]


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


@dataclass(frozen=True, slots=True)
class ParsedCard:
    """The `data` object of one card JSON, the spec it was read as and the warnings reading it gave."""

    data: dict[str, Any]
    spec: Spec
    warnings: tuple[str, ...]


UTF8_BOM = b"\xef\xbb\xbf"
MAX_JSON_DEPTH = 128

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


def card_from_json(body: bytes, where: str, limits: CardLimits) -> ParsedCard:
    """The card in card JSON, its fields checked and defaulted; `where` names it in errors ("body", "png.ccv3")."""
    return _card_from_document(_json_document(body, where, limits), where)


def _json_document(body: bytes, where: str, limits: CardLimits) -> Any:
    if len(body) > limits.max_json_bytes:
        raise CardFormatError(
            f"the card JSON is {len(body)} bytes, more than the limit of {limits.max_json_bytes}", where
        )
    not_text = "the upload is neither a PNG, a CHARX zip nor UTF-8 JSON" if where == "body" else "the JSON is not UTF-8"
    text = utf8_text(body.removeprefix(UTF8_BOM), where, not_text)
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
    check_json_tree(document, where)
    return document


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_json_tree(value: Any, where: str) -> None:
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


def _card_from_document(document: Any, where: str) -> ParsedCard:
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
        read_as = "no spec" if spec is None else f"unknown spec {shortened(spec)}"
        return _from_envelope(document, where, "v2", [f"{read_as}: read as V2 by its data object"])
    warning = None if spec is None else f"unknown spec {shortened(spec)}: read as V1, a flat object"
    return _from_flat(document, where, [warning])


def _from_envelope(document: dict[str, Any], where: str, spec: Spec, notes: list[str | None]) -> ParsedCard:
    inner = document["data"]
    kept = {key: value for key, value in document.items() if _root_key_kept(key, inner)}
    data = normalised({**inner, **kept}, f"{where}.data", spec == "v3")
    differing = [key for key, field in ST_ROOT_MIRRORS.items() if _mirror_differs(document, key, data.get(field))]
    if differing:
        notes.append(f"V1 fields at the root differ from data: data wins ({', '.join(differing)})")
    if kept:
        notes.append(f"fields at the root that data lacks were kept in data: {', '.join(kept)}")
    return ParsedCard(data, spec, tuple(note for note in notes if note))


def _root_key_kept(key: str, inner: dict[str, Any]) -> bool:
    return (
        key not in inner and key not in ENVELOPE_KEYS and key not in ST_ROOT_MIRRORS and key not in ST_LEGACY_ROOT_KEYS
    )


def _mirror_differs(document: dict[str, Any], key: str, value: Any) -> bool:
    return key in document and document[key] not in ("", [], None) and document[key] != value


def _from_flat(document: dict[str, Any], where: str, notes: list[str | None]) -> ParsedCard:
    if "entries" in document and not any(key in document for key in ("name", "char_name", "spec")):
        raise CardFormatError(
            "this looks like a World Info lorebook (it has entries, no card fields), not a card", where
        )
    flat = {key: value for key, value in document.items() if key not in ENVELOPE_KEYS}
    if not any(key in flat for key in TAVERNAI_FIELDS):
        return ParsedCard(normalised(flat, where, False), "v1", tuple(note for note in notes if note))
    data, origins = _tavernai_mapped(flat)
    return ParsedCard(normalised(data, where, False, origins), "tavernai", tuple(note for note in notes if note))


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
    return f"spec_version {shortened(version)} of a chara_card_v2 is not 2.0"


def _v3_version_warning(version: Any) -> str | None:
    number = _as_number(version)
    if number is None:
        return f"spec_version {shortened(version)} is not a number: read as 3.0"
    if number == 3.0:
        return None
    if 3.0 < number < 4.0:
        return f"spec_version {shortened(version)} is newer than 3.0"
    if number >= 4.0:
        return f"spec_version {shortened(version)} is a newer major version than 3.0: read as 3.0, every field kept"
    return f"spec_version {shortened(version)} is older than 3.0: read as 3.0"


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def normalised(raw: dict[str, Any], where: str, v3: bool, origins: Mapping[str, str] | None = None) -> dict[str, Any]:
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


def shortened(value: Any, limit: int = 40) -> str:
    """The value as a string for an error or a warning, cut to `limit` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def utf8_text(body: bytes, field: str, reason: str = "the text is not UTF-8") -> str:
    """The bytes decoded as UTF-8; `reason` and the first bad byte's place in the error otherwise."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CardFormatError(f"{reason} (byte {error.start})", field) from None
