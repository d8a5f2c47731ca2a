"""Lorebook files read into changji's `LoreEntry`, without I/O: SillyTavern World Info files
(`{"entries": {"<uid>": …}}`), a card's embedded `character_book` (V2/V3) and the standalone
`{"spec": "lorebook_v3", "data": …}`. The field names, their typed reading and its error live in `lorebook_fields`;
books are written back by `lorebook_export`.

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
* Positions: 0 is before_char; every other number (1 after char, 2–6 Author's Note, at depth, examples) is
  after_char, as ST's own card export does. A card entry without any position is after_char (ST's rule).
* Defaults for absent fields follow ST's import: World Info `selective` true; card `selective`, `constant` false,
  `enabled` true, `insertion_order` 100. JSON null reads as the field's absence.
* uid: the entry's `uid` (World Info; else its key in `entries` when that is a number; else its index) or `id`
  (card; else its index) when an int in 0…2**53; entries keep their own uids first, then a clash (or an unusable
  uid) takes the next free number. The unusable value is not kept.
* A whole V2/V3 card gives its `character_book`; a V3 lorebook's fields beside `spec` and `data` are not kept.
* Errors: wrong types and LoreEntry's limits (10,000 entries, 200 keys, lengths, ranges) raise
  `LorebookFormatError` naming the field as it is spelled in the file, e.g. "body.entries.3.key".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from domain.card.lore import LoreEntry, LorePosition, LoreScan
from interchange.lorebook_fields import (
    BOOK_FIELDS,
    CARD_ENTRY_FIELDS,
    CARD_MAPPED,
    CARD_NAMES,
    WI_MAPPED,
    WI_NAMES,
    FileObject,
    LorebookFormat,
    LorebookFormatError,
    file_object,
    is_int,
    validated_entry,
    validated_scan,
)

MAX_ENTRIES = 10_000
UID_MAX = 2**53


@dataclass(frozen=True, slots=True)
class ImportedLorebook:
    """A lorebook read from a file: its entries, scan settings, the book-level fields changji does not use
    (verbatim) and the format it came in (which also says how its entries' extensions are named)."""

    name: str
    scan: LoreScan
    entries: tuple[LoreEntry, ...]
    extras: dict[str, Any] = field(default_factory=dict)
    format: LorebookFormat = "world_info"


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
    return value if is_int(value) and 0 <= value <= UID_MAX else None


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
    book = FileObject(obj, "body")
    entries: Mapping[Any, Any] = obj["entries"]
    _checked_count(len(entries), "body.entries")
    sources = [file_object(value, f"body.entries.{key}") for key, value in entries.items()]
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


def _wi_wanted_uid(key: Any, source: FileObject, index: int) -> tuple[int, bool]:
    """The entry's `uid`, else its key in `entries` when that is a number (both its own), else its index."""
    own = _own_uid(source.data.get("uid"))
    if own is None and isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 17:
        own = _own_uid(int(key))
    return (index, False) if own is None else (own, True)


def _wi_entry(source: FileObject, uid: int) -> LoreEntry:
    number = source.integer("position")
    number = 0 if number is None else number
    extensions = {k: v for k, v in source.data.items() if k not in WI_MAPPED}
    if number not in (0, 1):
        extensions["position"] = number
    return validated_entry(
        source,
        WI_NAMES,
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
    book = file_object(obj, at)
    entries = book.data.get("entries")
    if not isinstance(entries, list):
        raise book.fail("entries", "must be a list")
    _checked_count(len(entries), book.where("entries"))
    sources = [file_object(value, f"{at}.entries.{i}") for i, value in enumerate(entries)]
    uids = _unique_uids([_wanted_uid(source.data.get("id"), i) for i, source in enumerate(sources)])
    return ImportedLorebook(
        name=book.string("name") or name,
        scan=validated_scan(
            book,
            scan_depth=_default(book.integer("scan_depth"), LoreScan().scan_depth),
            recursive=bool(book.boolean("recursive_scanning")),
        ),
        entries=tuple(_card_entry(source, uid) for source, uid in zip(sources, uids, strict=True)),
        extras={k: v for k, v in book.data.items() if k not in BOOK_FIELDS},
        format=format,
    )


def _card_entry(source: FileObject, uid: int) -> LoreEntry:
    extensions = source.mapping("extensions")
    ext = FileObject(extensions, source.where("extensions"))
    unknown = {k: v for k, v in source.data.items() if k not in CARD_MAPPED}
    if unknown:
        extensions[CARD_ENTRY_FIELDS] = unknown
    comment = source.string("comment")
    names = {**CARD_NAMES, "title": "comment" if comment else "name"}
    case_sensitive = ext.boolean("case_sensitive")
    return validated_entry(
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


def _card_position(source: FileObject, ext: FileObject) -> LorePosition:
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
        card = file_object(obj.get("data"), "body.data")
        return _character_book(card.data.get("character_book"), "body.data.character_book", "character_book", name)
    entries = obj.get("entries")
    if isinstance(entries, Mapping):
        return _world_info(obj, name)
    if isinstance(entries, list):
        return _character_book(obj, "body", "character_book", name)
    raise LorebookFormatError("must be an object (World Info) or a list (character book)", "body.entries")
