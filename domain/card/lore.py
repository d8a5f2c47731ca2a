"""Lorebook values: entries in changji's own form (what World Info files, a card's `character_book` and the
model's `lorebook_write` all become), a book's scan settings, the books activation reads and what it found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SelectiveLogic = Literal["and_any", "not_all", "not_any", "and_all"]
LorePosition = Literal["before_char", "after_char"]
LoreBookKind = Literal["embedded", "world_info", "supplement"]


class LoreEntry(BaseModel):
    """One entry. `uid` is unique within its book. Fields other systems have and changji does not use are
    kept verbatim in `extensions` (so an export gives them back)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    uid: int = Field(ge=0, le=2**53)
    keys: tuple[str, ...] = Field((), max_length=200)
    secondary_keys: tuple[str, ...] = Field((), max_length=200)
    title: str = Field("", max_length=500, description="the comment or name; the first key when empty")
    content: str = Field("", max_length=100_000)
    constant: bool = False
    enabled: bool = True
    selective: bool = True
    logic: SelectiveLogic = "and_any"
    order: int = Field(100, ge=-(2**31), le=2**31, description="lower is inserted first (higher in the prompt)")
    position: LorePosition = "before_char"
    case_sensitive: bool | None = Field(None, description="None: the book's setting")
    whole_words: bool | None = Field(None, description="None: the book's setting")
    use_regex: bool = Field(False, description="every key is a regular expression (V3 `use_regex`)")
    scan_depth: int | None = Field(None, ge=0, le=1000, description="None: the book's setting")
    extensions: dict[str, Any] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.title or (self.keys[0] if self.keys else f"#{self.uid}")


class LoreScan(BaseModel):
    """How a book's entries are matched; an entry's own setting, where it has one, wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scan_depth: int = Field(4, ge=0, le=1000, description="the newest messages of the path scanned for keys")
    case_sensitive: bool = False
    whole_words: bool = True
    max_hits: int = Field(3, ge=0, le=100, description="keyword hits kept per turn (constants not counted)")
    recursive: bool = Field(False, description="hit entries' content scanned again for more keys")
    max_recursion: int = Field(3, ge=0, le=20)


@dataclass(frozen=True, slots=True)
class LoreHit:
    """An entry activation chose, and why: the key (and secondary key) that fired, or `constant`."""

    book_id: str
    entry: LoreEntry
    key: str | None
    secondary: str | None = None
    recursion: int = 0

    @property
    def why(self) -> str:
        if self.key is None:
            return "constant"
        return f"key {self.key!r}" + (f" with {self.secondary!r}" if self.secondary else "")


@dataclass(frozen=True, slots=True)
class LoreBookView:
    """One book as activation and search see it: its entries in the book's order and its scan settings."""

    book_id: str
    scan: LoreScan
    entries: Sequence[LoreEntry]
    excluded: frozenset[int] = frozenset()  # uids that take no part here (the same entries, seen from elsewhere)


@dataclass(frozen=True, slots=True)
class LoreActivation:
    """What one turn's activation chose: constant entries (by order), the keyword hits kept (at most the books'
    `max_hits`, in prompt order), how many hits were dropped, and the regex keys that ran out of time."""

    constants: tuple[LoreHit, ...]
    hits: tuple[LoreHit, ...]
    not_kept: int
    timed_out: tuple[tuple[str, int, str], ...]
