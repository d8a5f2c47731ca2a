"""Lorebook files ↔ changji's `LoreEntry`, without I/O: SillyTavern World Info files (`{"entries": {"<uid>": …}}`),
a card's embedded `character_book` (V2/V3) and the standalone `{"spec": "lorebook_v3", "data": …}`. Field facts:
shared/reference/sillytavern.md §6.2, §6.3, §6.5.

Decisions:

* Unknown fields. A World Info entry's fields changji has no field for go into `LoreEntry.extensions` under their
  own names, verbatim; a World Info entry's own `extensions` object, if it has one, is such a field too and is kept
  whole under the key "extensions" (never merged), so nothing can collide. A position other than 0 or 1 is kept
  there as "position". A card entry's `extensions` object is `LoreEntry.extensions` itself, verbatim (ST's numeric
  `position`, `depth`, `probability`, … stay in it); the card entry's other fields changji has no field for (`name`,
  `priority`, foreign ones) are kept together under the reserved key `CARD_ENTRY_FIELDS`, apart from the
  extensions object's own keys. Values are kept by reference, not deep-copied.
* What is read from a card entry's extensions (ST's way): `selectiveLogic`, `case_sensitive` (over the top-level
  V3 `case_sensitive`), `match_whole_words`, `scan_depth`, and `position` as a number (over the top-level string).
  On export those keys are written back from the entry's own fields.
* Positions: 0 is before_char; every other number (1 after char, 2–6 Author's Note, at depth, examples) is
  after_char, as ST's own card export does. A card entry without any position is after_char (ST's rule).
* Defaults for absent fields follow ST's import: World Info `selective` true; card `selective`, `constant` false,
  `enabled` true, `insertion_order` 100. JSON null reads as the field's absence.
* uid: the entry's `uid` (World Info; else its key in `entries` when that is a number; else its index) or `id`
  (card; else its index) when an int in 0…2**53; entries keep their own uids first, then a clash (or an unusable
  uid) takes the next free number. The unusable value is not kept.
* Exports write the fields ST always writes, the optional ones (`selectiveLogic`, `caseSensitive`,
  `matchWholeWords`, `scanDepth`; a card book's `scan_depth`, `recursive_scanning`) only when they differ from the
  default, the keys read from a card entry's extensions only when the extensions would otherwise read differently
  (a null stays null), and the unknown fields back: a file that spelled out a default gets it back as an absent
  field, which ST reads the same, and reading an export gives the same entries. A book's `extras` are written back
  only into its own family (World Info, or character book / V3); a World Info book's `name` when not empty.
* Reading: a whole V2/V3 card gives its `character_book`; a V3 lorebook's fields beside `spec` and `data` are not
  kept.
* Across formats the extensions are translated by ST's table (`excludeRecursion` ↔ `exclude_recursion`, …); card
  extension keys outside the table go into the World Info entry's `extensions` object, and a `use_regex` entry's
  keys are written `/pattern/` (with `i` unless case-sensitive), since World Info knows only that form. A card
  entry whose title came from `name` exports it as `comment` as well.
* Errors: wrong types and LoreEntry's limits (10,000 entries, 200 keys, lengths, ranges) raise
  `LorebookFormatError` naming the field as it is spelled in the file, e.g. "body.entries.3.key".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

from pydantic import ValidationError

from domain.card.lore import LoreEntry, LorePosition, LoreScan, SelectiveLogic

LorebookFormat = Literal["world_info", "character_book", "lorebook_v3"]

MAX_ENTRIES = 10_000
UID_MAX = 2**53
CARD_ENTRY_FIELDS = "character_book_fields"
LOGICS: tuple[SelectiveLogic, ...] = ("and_any", "not_all", "not_any", "and_all")

_WI_MAPPED = frozenset(
    {"uid", "key", "keysecondary", "comment", "content", "constant", "selective", "selectiveLogic", "order"}
    | {"position", "disable", "caseSensitive", "matchWholeWords", "scanDepth"}
)
_CARD_MAPPED = frozenset(
    {"id", "keys", "secondary_keys", "comment", "content", "constant", "enabled", "selective", "insertion_order"}
    | {"position", "case_sensitive", "use_regex", "extensions"}
)
_CARD_EXT_MAPPED = frozenset({"selectiveLogic", "case_sensitive", "match_whole_words", "scan_depth", "position"})
_WI_TO_CARD_EXT = {
    "excludeRecursion": "exclude_recursion",
    "preventRecursion": "prevent_recursion",
    "delayUntilRecursion": "delay_until_recursion",
    "displayIndex": "display_index",
    "groupOverride": "group_override",
    "groupWeight": "group_weight",
    "useGroupScoring": "use_group_scoring",
    "automationId": "automation_id",
    **{name: name for name in ("probability", "useProbability", "depth", "group", "role", "vectorized")},
    **{name: name for name in ("sticky", "cooldown", "delay")},
}
_CARD_EXT_TO_WI = {card: wi for wi, card in _WI_TO_CARD_EXT.items()}
_WI_NAMES = {
    "keys": "key",
    "secondary_keys": "keysecondary",
    "title": "comment",
    "content": "content",
    "order": "order",
    "scan_depth": "scanDepth",
}
_CARD_NAMES = {
    "keys": "keys",
    "secondary_keys": "secondary_keys",
    "title": "comment",
    "content": "content",
    "order": "insertion_order",
    "scan_depth": "extensions.scan_depth",
}
_BOOK_FIELDS = frozenset({"name", "entries", "scan_depth", "recursive_scanning"})


class LorebookFormatError(ValueError):
    """A lorebook that cannot be read: why, and the field at fault ("body.entries.3.key")."""

    def __init__(self, reason: str, field: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class ImportedLorebook:
    """A lorebook read from a file: its entries, scan settings, the book-level fields changji does not use
    (verbatim) and the format it came in (which also says how its entries' extensions are named)."""

    name: str
    scan: LoreScan
    entries: tuple[LoreEntry, ...]
    extras: dict[str, Any] = field(default_factory=dict)
    format: LorebookFormat = "world_info"


@dataclass(frozen=True, slots=True)
class _Object:
    """A JSON object being read, with typed getters that name the field at fault."""

    data: Mapping[str, Any]
    at: str

    def where(self, name: str) -> str:
        return f"{self.at}.{name}"

    def fail(self, name: str, reason: str) -> LorebookFormatError:
        return LorebookFormatError(reason, self.where(name))

    def string(self, name: str) -> str:
        value = self.data.get(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.fail(name, "must be a string")
        return value

    def boolean(self, name: str) -> bool | None:
        value = self.data.get(name)
        if value is not None and not isinstance(value, bool):
            raise self.fail(name, "must be true or false")
        return value

    def integer(self, name: str) -> int | None:
        value = self.data.get(name)
        if value is not None and not _is_int(value):
            raise self.fail(name, "must be an integer")
        return value

    def strings(self, name: str) -> tuple[str, ...]:
        value = self.data.get(name)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(name, "must be a list of strings")
        return tuple(value)

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.data.get(name)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(name, "must be an object")
        return dict(value)

    def logic(self, name: str) -> SelectiveLogic:
        value = self.integer(name)
        if value is None:
            return "and_any"
        if not 0 <= value < len(LOGICS):
            raise self.fail(name, "must be 0 (AND ANY), 1 (NOT ALL), 2 (NOT ANY) or 3 (AND ALL)")
        return LOGICS[value]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: Any, at: str) -> _Object:
    if not isinstance(value, Mapping):
        raise LorebookFormatError("must be an object", at)
    return _Object(value, at)


def _entry(source: _Object, names: Mapping[str, str], **fields: Any) -> LoreEntry:
    try:
        return LoreEntry.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        name = names.get(str(first["loc"][0]), "") if first["loc"] else ""
        raise LorebookFormatError(first["msg"], source.where(name) if name else source.at) from None


def _scan(source: _Object, **fields: Any) -> LoreScan:
    try:
        return LoreScan.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        name = {"scan_depth": "scan_depth", "recursive": "recursive_scanning"}.get(str(first["loc"][0]), "")
        raise LorebookFormatError(first["msg"], source.where(name) if name else source.at) from None


def _unique_uids(wanted: Sequence[tuple[int, bool]]) -> list[int]:
    """One uid per entry from (wanted uid, whether the entry named it): named uids first, a clash takes the next
    free number."""
    uids: list[int | None] = [None] * len(wanted)
    taken: set[int] = set()
    for i, (uid, named) in enumerate(wanted):
        if named and uid not in taken:
            uids[i] = uid
            taken.add(uid)
    for i, (uid, _) in enumerate(wanted):
        if uids[i] is None:
            candidate = uid
            while candidate in taken:
                candidate = candidate + 1 if candidate < UID_MAX else 0
            uids[i] = candidate
            taken.add(candidate)
    return [uid for uid in uids if uid is not None]


def _own_uid(value: Any) -> int | None:
    return value if _is_int(value) and 0 <= value <= UID_MAX else None


def _wanted_uid(own: Any, fallback: int) -> tuple[int, bool]:
    uid = _own_uid(own)
    return (fallback, False) if uid is None else (uid, True)


def _position(number: int) -> LorePosition:
    return "before_char" if number == 0 else "after_char"


def _checked_count(count: int, at: str) -> None:
    if count > MAX_ENTRIES:
        raise LorebookFormatError(f"at most {MAX_ENTRIES} entries", at)


# World Info


def _world_info(obj: Mapping[str, Any], name: str) -> ImportedLorebook:
    book = _Object(obj, "body")
    entries: Mapping[Any, Any] = obj["entries"]
    _checked_count(len(entries), "body.entries")
    sources = [_object(value, f"body.entries.{key}") for key, value in entries.items()]
    uids = _unique_uids(
        [_wi_wanted_uid(key, source, i) for i, (key, source) in enumerate(zip(entries, sources, strict=True))]
    )
    return ImportedLorebook(
        name=book.string("name") or name,
        scan=LoreScan(),
        entries=tuple(_wi_entry(source, uid) for source, uid in zip(sources, uids, strict=True)),
        extras={k: v for k, v in obj.items() if k not in ("entries", "name")},
        format="world_info",
    )


def _wi_wanted_uid(key: Any, source: _Object, index: int) -> tuple[int, bool]:
    """The entry's `uid`, else its key in `entries` when that is a number (both its own), else its index."""
    own = _own_uid(source.data.get("uid"))
    if own is None and isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 17:
        own = _own_uid(int(key))
    return (index, False) if own is None else (own, True)


def _wi_entry(source: _Object, uid: int) -> LoreEntry:
    number = source.integer("position")
    number = 0 if number is None else number
    extensions = {k: v for k, v in source.data.items() if k not in _WI_MAPPED}
    if number not in (0, 1):
        extensions["position"] = number
    return _entry(
        source,
        _WI_NAMES,
        uid=uid,
        keys=source.strings("key"),
        secondary_keys=source.strings("keysecondary"),
        title=source.string("comment"),
        content=source.string("content"),
        constant=bool(source.boolean("constant")),
        enabled=not source.boolean("disable"),
        selective=source.boolean("selective") is not False,
        logic=source.logic("selectiveLogic"),
        order=_default(source.integer("order"), 100),
        position=_position(number),
        case_sensitive=source.boolean("caseSensitive"),
        whole_words=source.boolean("matchWholeWords"),
        scan_depth=source.integer("scanDepth"),
        extensions=extensions,
    )


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


# Character book (V2, V3)


def character_book_entries(book: Mapping[str, Any], *, at: str = "character_book") -> ImportedLorebook:
    """A card's embedded `character_book` (V2 or V3); `at` is where it sits, for the fields errors name."""
    return _character_book(book, at, "character_book", "")


def _character_book(obj: Any, at: str, format: LorebookFormat, name: str) -> ImportedLorebook:
    book = _object(obj, at)
    entries = book.data.get("entries")
    if not isinstance(entries, list):
        raise book.fail("entries", "must be a list")
    _checked_count(len(entries), book.where("entries"))
    sources = [_object(value, f"{at}.entries.{i}") for i, value in enumerate(entries)]
    uids = _unique_uids([_wanted_uid(source.data.get("id"), i) for i, source in enumerate(sources)])
    return ImportedLorebook(
        name=book.string("name") or name,
        scan=_scan(
            book,
            scan_depth=_default(book.integer("scan_depth"), LoreScan().scan_depth),
            recursive=bool(book.boolean("recursive_scanning")),
        ),
        entries=tuple(_card_entry(source, uid) for source, uid in zip(sources, uids, strict=True)),
        extras={k: v for k, v in book.data.items() if k not in _BOOK_FIELDS},
        format=format,
    )


def _card_entry(source: _Object, uid: int) -> LoreEntry:
    extensions = source.mapping("extensions")
    ext = _Object(extensions, source.where("extensions"))
    unknown = {k: v for k, v in source.data.items() if k not in _CARD_MAPPED}
    if unknown:
        extensions[CARD_ENTRY_FIELDS] = unknown
    comment = source.string("comment")
    names = {**_CARD_NAMES, "title": "comment" if comment else "name"}
    case_sensitive = ext.boolean("case_sensitive")
    return _entry(
        source,
        names,
        uid=uid,
        keys=source.strings("keys"),
        secondary_keys=source.strings("secondary_keys"),
        title=comment or source.string("name"),
        content=source.string("content"),
        constant=bool(source.boolean("constant")),
        enabled=source.boolean("enabled") is not False,
        selective=bool(source.boolean("selective")),
        logic=ext.logic("selectiveLogic"),
        order=_default(source.integer("insertion_order"), 100),
        position=_card_position(source, ext),
        case_sensitive=source.boolean("case_sensitive") if case_sensitive is None else case_sensitive,
        whole_words=ext.boolean("match_whole_words"),
        use_regex=bool(source.boolean("use_regex")),
        scan_depth=ext.integer("scan_depth"),
        extensions=extensions,
    )


def _card_position(source: _Object, ext: _Object) -> LorePosition:
    number = ext.integer("position")
    if number is not None:
        return _position(number)
    written = source.string("position")
    if written not in ("", "before_char", "after_char"):
        raise source.fail("position", 'must be "before_char" or "after_char"')
    return "before_char" if written == "before_char" else "after_char"


# Reading


def read_lorebook(obj: Any, *, name: str = "") -> ImportedLorebook:
    """A parsed JSON lorebook in any of the formats (a whole V2/V3 card gives its `character_book`); `name` is
    used when the file names no book."""
    if not isinstance(obj, Mapping):
        raise LorebookFormatError("a lorebook is a JSON object", "body")
    spec = obj.get("spec")
    if spec == "lorebook_v3":
        return _character_book(obj.get("data"), "body.data", "lorebook_v3", name)
    if spec in ("chara_card_v2", "chara_card_v3"):
        card = _object(obj.get("data"), "body.data")
        return _character_book(card.data.get("character_book"), "body.data.character_book", "character_book", name)
    entries = obj.get("entries")
    if isinstance(entries, Mapping):
        return _world_info(obj, name)
    if isinstance(entries, list):
        return _character_book(obj, "body", "character_book", name)
    raise LorebookFormatError("must be an object (World Info) or a list (character book)", "body.entries")


# Writing


def _st_position(entry: LoreEntry) -> int:
    """ST's position number: the one kept in extensions while it agrees with the entry's position."""
    kept = entry.extensions.get("position")
    if _is_int(kept) and (kept == 0) == (entry.position == "before_char"):
        return kept
    return 0 if entry.position == "before_char" else 1


def _slashed(key: str, case_sensitive: bool | None) -> str:
    if key.startswith("/") and key.rstrip("gimsuxy").endswith("/") and len(key.rstrip("gimsuxy")) > 1:
        return key
    escaped = "".join("\\/" if ch == "/" and (i == 0 or key[i - 1] != "\\") else ch for i, ch in enumerate(key))
    return f"/{escaped}/" + ("" if case_sensitive else "i")


def _st_keys(keys: Sequence[str], entry: LoreEntry) -> list[str]:
    return [_slashed(k, entry.case_sensitive) for k in keys] if entry.use_regex else list(keys)


def _wi_extensions(entry: LoreEntry, native: bool) -> dict[str, Any]:
    if native:
        return entry.extensions
    out: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for key, value in entry.extensions.items():
        if key in _CARD_EXT_TO_WI:
            out[_CARD_EXT_TO_WI[key]] = value
        elif key not in _CARD_EXT_MAPPED and key != CARD_ENTRY_FIELDS:
            nested[key] = value
    if nested:
        out["extensions"] = nested
    top = entry.extensions.get(CARD_ENTRY_FIELDS)
    return {**top, **out} if isinstance(top, Mapping) else out


def _wi_entry_json(entry: LoreEntry, native: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "uid": entry.uid,
        "key": _st_keys(entry.keys, entry),
        "keysecondary": _st_keys(entry.secondary_keys, entry),
        "comment": entry.title,
        "content": entry.content,
        "constant": entry.constant,
        "selective": entry.selective,
        "order": entry.order,
        "position": _st_position(entry),
        "disable": not entry.enabled,
    }
    optional = {
        "selectiveLogic": LOGICS.index(entry.logic) or None,
        "caseSensitive": entry.case_sensitive,
        "matchWholeWords": entry.whole_words,
        "scanDepth": entry.scan_depth,
    }
    out |= {k: v for k, v in optional.items() if v is not None}
    for key, value in _wi_extensions(entry, native).items():
        out.setdefault(key, value)
    return out


def world_info_json(book: ImportedLorebook) -> dict[str, Any]:
    """The book as a SillyTavern World Info file, `{"entries": {"<uid>": {...}}}`."""
    native = book.format == "world_info"
    out: dict[str, Any] = {"entries": {str(e.uid): _wi_entry_json(e, native) for e in book.entries}}
    for key, value in book.extras.items() if native else ():
        out.setdefault(key, value)
    if book.name:
        out["name"] = book.name
    return out


def _card_extensions(entry: LoreEntry, native: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The card entry's extensions object, and its top-level fields changji has no field for."""
    if native:
        ext = dict(entry.extensions)
        top = ext.get(CARD_ENTRY_FIELDS)
        if not isinstance(top, Mapping):
            return ext, {}
        del ext[CARD_ENTRY_FIELDS]
        return ext, dict(top)
    ext = {_WI_TO_CARD_EXT.get(k, k): v for k, v in entry.extensions.items() if k not in ("extensions", "position")}
    nested = entry.extensions.get("extensions")
    if isinstance(nested, Mapping):
        ext = {**nested, **ext}
    ext["position"] = _st_position(entry)
    return ext, {}


def _put(ext: dict[str, Any], key: str, value: Any, default: Any) -> None:
    """`value` into the extensions when they would otherwise read as something else (null reads as `default`)."""
    written = ext.get(key)
    if (default if written is None else written) != value:
        ext[key] = value


def _card_entry_json(entry: LoreEntry, native: bool, v3: bool) -> dict[str, Any]:
    ext, top = _card_extensions(entry, native)
    _put(ext, "selectiveLogic", LOGICS.index(entry.logic), 0)
    _put(ext, "match_whole_words", entry.whole_words, None)
    _put(ext, "scan_depth", entry.scan_depth, None)
    if _is_int(ext.get("position")):
        ext["position"] = _st_position(entry)
    out: dict[str, Any] = {
        "id": entry.uid,
        "keys": list(entry.keys),
        "secondary_keys": list(entry.secondary_keys),
        "comment": entry.title,
        "content": entry.content,
        "constant": entry.constant,
        "selective": entry.selective,
        "insertion_order": entry.order,
        "enabled": entry.enabled,
        "position": entry.position,
        "extensions": ext,
    }
    if isinstance(ext.get("case_sensitive"), bool) or (not native and entry.case_sensitive is not None):
        ext["case_sensitive"] = entry.case_sensitive
    elif entry.case_sensitive is not None:
        out["case_sensitive"] = entry.case_sensitive
    if v3 or entry.use_regex:
        out["use_regex"] = entry.use_regex
    return {**top, **out}


def character_book_json(book: ImportedLorebook) -> dict[str, Any]:
    """The book as a V2 card's `character_book` (with `use_regex` on every entry when it was read as V3)."""
    native = book.format != "world_info"
    out: dict[str, Any] = {"name": book.name} if book.name else {}
    if native:
        out |= book.extras
    if book.scan.scan_depth != LoreScan().scan_depth:
        out["scan_depth"] = book.scan.scan_depth
    if book.scan.recursive:
        out["recursive_scanning"] = True
    out["entries"] = [_card_entry_json(e, native, book.format == "lorebook_v3") for e in book.entries]
    return out


def lorebook_v3_json(book: ImportedLorebook) -> dict[str, Any]:
    """The book as a standalone V3 lorebook, `{"spec": "lorebook_v3", "data": {...}}`."""
    data = character_book_json(book)
    for entry in data["entries"]:
        entry.setdefault("use_regex", False)
    return {"spec": "lorebook_v3", "data": data}
