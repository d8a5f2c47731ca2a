"""A card's lorebooks and their entries, and lore search."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import Strict


class LoreEntryModel(BaseModel):
    uid: int
    keys: list[str]
    secondary_keys: list[str]
    title: str
    content: str
    constant: bool
    enabled: bool
    selective: bool
    logic: str
    order: int
    position: str
    case_sensitive: bool | None
    whole_words: bool | None
    use_regex: bool
    scan_depth: int | None
    extensions: dict[str, Any]
    pending: bool = Field(False, description="held by the write gate until the user approves it")
    written_at: dict[str, UUID] | None = Field(None, description="the model's entries: the story and node")


class LorebookResponse(BaseModel):
    id: str = Field(description="the lorebook's id; `embedded` for the card's own character_book")
    card_id: UUID
    version: int
    name: str
    kind: Literal["embedded", "world_info", "supplement"]
    format: str
    scan: dict[str, Any]
    extras: dict[str, Any]
    entries: list[LoreEntryModel]


class LoreEntryListResponse(BaseModel):
    lorebook_id: str = Field(description="the lorebook's id; `embedded` for the card's own character_book")
    version: int = Field(description="the version of the lorebook (of the card, for the embedded one)")
    items: list[LoreEntryModel] = Field(description="entries by uid, each with every field it is edited by")
    next_cursor: str | None = Field(description="the last uid of this page, when more follow")


class LorebookSummary(BaseModel):
    id: str
    name: str
    kind: Literal["embedded", "world_info", "supplement"]
    entries: int


class LorebookListResponse(BaseModel):
    items: list[LorebookSummary]


class LoreEntryRequest(Strict):
    """An entry's fields (changji's form); `uid` is given the next free number when left out."""

    uid: int | None = Field(None, ge=0, le=2**53)
    keys: list[str] = Field(default_factory=list, max_length=200)
    secondary_keys: list[str] = Field(default_factory=list, max_length=200)
    title: str = Field("", max_length=500)
    content: str = Field("", max_length=100_000)
    constant: bool = False
    enabled: bool = True
    selective: bool = True
    logic: Literal["and_any", "not_all", "not_any", "and_all"] = "and_any"
    order: int = Field(100, ge=-(2**31), le=2**31, description="lower is inserted first")
    position: Literal["before_char", "after_char"] = "before_char"
    case_sensitive: bool | None = None
    whole_words: bool | None = None
    use_regex: bool = False
    scan_depth: int | None = Field(None, ge=0, le=1000)
    extensions: dict[str, Any] = Field(default_factory=dict)


class LoreEntryChanges(Strict):
    """The fields to change; the others are kept. `enabled` switches the entry off or on."""

    keys: list[str] | None = Field(None, max_length=200)
    secondary_keys: list[str] | None = Field(None, max_length=200)
    title: str | None = Field(None, max_length=500)
    content: str | None = Field(None, max_length=100_000)
    constant: bool | None = None
    enabled: bool | None = None
    selective: bool | None = None
    logic: Literal["and_any", "not_all", "not_any", "and_all"] | None = None
    order: int | None = Field(None, ge=-(2**31), le=2**31)
    position: Literal["before_char", "after_char"] | None = None
    case_sensitive: bool | None = None
    whole_words: bool | None = None
    use_regex: bool | None = None
    scan_depth: int | None = Field(None, ge=0, le=1000)
    extensions: dict[str, Any] | None = None


class LoreSearchHit(BaseModel):
    book_id: str
    score: int
    entry: LoreEntryModel


class LoreSearchResponse(BaseModel):
    query: str
    items: list[LoreSearchHit]
