"""The fields of lorebook files and their reading. What each format family (SillyTavern World Info, a card's
`character_book` and the standalone `lorebook_v3`) calls each of `LoreEntry`'s fields, the fields it maps (ST's
table of extension names across the families is `domain.card.lore.WI_TO_CARD_EXT`, which activation reads
too), the numbers of the selective logics and the reserved key a card entry's unmapped fields are kept under; and a file's objects read field by field by type (`FileObject`), entries
and scan settings validated into `LoreEntry` and `LoreScan`, every error a `LorebookFormatError` naming the field
as it is spelled in the file, e.g. "body.entries.3.key". Field facts: shared/reference/sillytavern.md §6.2, §6.3,
§6.5.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from pydantic import ValidationError

from domain.card.lore import WI_TO_CARD_EXT, LoreEntry, LoreScan, SelectiveLogic

LorebookFormat = Literal["world_info", "character_book", "lorebook_v3"]

CARD_ENTRY_FIELDS = "character_book_fields"
LOGICS: tuple[SelectiveLogic, ...] = ("and_any", "not_all", "not_any", "and_all")

WI_MAPPED = frozenset(
    {"uid", "key", "keysecondary", "comment", "content", "constant", "selective", "selectiveLogic", "order"}
    | {"position", "disable", "caseSensitive", "matchWholeWords", "scanDepth"}
)
CARD_MAPPED = frozenset(
    {"id", "keys", "secondary_keys", "comment", "content", "constant", "enabled", "selective", "insertion_order"}
    | {"position", "case_sensitive", "use_regex", "extensions"}
)
CARD_EXT_MAPPED = frozenset({"selectiveLogic", "case_sensitive", "match_whole_words", "scan_depth", "position"})
CARD_EXT_TO_WI = {card: wi for wi, card in WI_TO_CARD_EXT.items()}
WI_NAMES = {
    "keys": "key",
    "secondary_keys": "keysecondary",
    "title": "comment",
    "content": "content",
    "order": "order",
    "scan_depth": "scanDepth",
}
CARD_NAMES = {
    "keys": "keys",
    "secondary_keys": "secondary_keys",
    "title": "comment",
    "content": "content",
    "order": "insertion_order",
    "scan_depth": "extensions.scan_depth",
}
BOOK_FIELDS = frozenset({"name", "entries", "scan_depth", "recursive_scanning"})


class LorebookFormatError(ValueError):
    """A lorebook that cannot be read: why, and the field at fault ("body.entries.3.key")."""

    def __init__(self, reason: str, field: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class FileObject:
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
        if type(value) is float and value.is_integer():  # (JSON's 2.0 is the integer 2, as JSON Schema has it)
            return int(value)
        if value is not None and not is_int(value):
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


def file_object(value: Any, at: str) -> FileObject:
    """The value as an object of the file at `at`; anything else is an error there."""
    if not isinstance(value, Mapping):
        raise LorebookFormatError("must be an object", at)
    return FileObject(value, at)


def validated_entry(source: FileObject, names: Mapping[str, str], **fields: Any) -> LoreEntry:
    """The entry validated; an error names the file's own field (`names` maps LoreEntry's fields to the file's)."""
    try:
        return LoreEntry.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        name = names.get(str(first["loc"][0]), "") if first["loc"] else ""
        raise LorebookFormatError(first["msg"], source.where(name) if name else source.at) from None


def validated_scan(source: FileObject, **fields: Any) -> LoreScan:
    """The book's scan settings validated; an error names the file's own field."""
    try:
        return LoreScan.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        name = {"scan_depth": "scan_depth", "recursive": "recursive_scanning"}.get(str(first["loc"][0]), "")
        raise LorebookFormatError(first["msg"], source.where(name) if name else source.at) from None


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer: an int that is not a boolean."""
    return isinstance(value, int) and not isinstance(value, bool)
