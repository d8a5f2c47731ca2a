"""Lorebooks written back without I/O, from an `ImportedLorebook` of any format: `world_info_json` as a SillyTavern
World Info file, `character_book_json` as a card's `character_book`, `lorebook_v3_json` as a standalone V3 lorebook.

Decisions:

* Exports write the fields ST always writes, the optional ones (`selectiveLogic`, `caseSensitive`,
  `matchWholeWords`, `scanDepth`; a card book's `scan_depth`, `recursive_scanning`) only when they differ from the
  default, the keys read from a card entry's extensions (`selectiveLogic`, `case_sensitive`, `match_whole_words`,
  `scan_depth`, `position`) from the entry's own fields and only when the extensions would otherwise read
  differently (a null stays null), and the unknown fields back: a file that spelled out a default gets it back as
  an absent field, which ST reads the same, and reading an export gives the same entries. A book's `extras` are
  written back only into its own family (World Info, or character book / V3); a World Info book's `name` when not
  empty.
* Across formats the extensions are translated by ST's table (`excludeRecursion` ↔ `exclude_recursion`, …); card
  extension keys outside the table go into the World Info entry's `extensions` object, and a `use_regex` entry's
  keys are written `/pattern/` (with `i` unless case-sensitive), since World Info knows only that form. A card
  entry whose title came from `name` exports it as `comment` as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from domain.card.lore import WI_TO_CARD_EXT, LoreEntry, LoreScan
from interchange.lorebook_fields import CARD_ENTRY_FIELDS, CARD_EXT_MAPPED, CARD_EXT_TO_WI, LOGICS, is_int
from interchange.lorebooks import ImportedLorebook


def _st_position(entry: LoreEntry) -> int:
    """ST's position number: the one kept in extensions while it agrees with the entry's position."""
    kept = entry.extensions.get("position")
    if is_int(kept) and (kept == 0) == (entry.position == "before_char"):
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
        if key in CARD_EXT_TO_WI:
            out[CARD_EXT_TO_WI[key]] = value
        elif key not in CARD_EXT_MAPPED and key != CARD_ENTRY_FIELDS:
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
    ext = {WI_TO_CARD_EXT.get(k, k): v for k, v in entry.extensions.items() if k not in ("extensions", "position")}
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
    if is_int(ext.get("position")):
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
