"""Cards: create, update, merge, and the card as answered."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import SettingsOverrides, Strict
from domain.values import CardData


class CreateCardRequest(Strict):
    card: CardData = Field(description="Character Card V2 `data` fields (unknown fields kept verbatim)")
    settings: SettingsOverrides = Field(default_factory=SettingsOverrides)


class UpdateCardRequest(Strict):
    card: dict[str, Any] | None = Field(None, description="card fields to replace; others are kept")
    settings: SettingsOverrides | None = None


class MergeCardRequest(Strict):
    into: UUID = Field(description="the card to merge this one into: its stories move there")


class FileRef(BaseModel):
    path: str | None = None
    sha256: str
    media_type: str
    size: int


class LorebookRef(BaseModel):
    id: UUID
    name: str


class CardResponse(BaseModel):
    id: UUID
    version: int
    name: str
    card: dict[str, Any]
    settings: dict[str, Any]
    anchor: str = Field(
        "", description="the identity anchor in use: `settings.identity_anchor`, or, while that is empty, the one"
        " derived from the card (its description's opening, its personality when short, its post-history"
        " instructions)",
    )  # fmt: skip
    language: Literal["zh", "en"] = Field(description="the language of changji's texts in this card's prompts")
    source: dict[str, Any] = Field(
        default_factory=dict, description="an imported card: the file it came from (container, spec, warnings)"
    )
    art: FileRef | None = Field(None, description="an imported card's image (exported back with the PNG)")
    assets: list[FileRef] = Field(default_factory=list, description="other files of an imported card (CHARX)")
    lorebooks: list[LorebookRef] = Field(default_factory=list, description="stand-alone lorebooks attached")
    created_at: datetime
    updated_at: datetime


class MergeCardResponse(BaseModel):
    card: CardResponse = Field(description="the card merged into, as it is now")
    stories_moved: int = Field(description="the stories this request moved (none when asked again)")


class CardSummary(BaseModel):
    id: UUID
    name: str
    tags: list[str]
    created_at: datetime
    updated_at: datetime


class CardListResponse(BaseModel):
    items: list[CardSummary]
    next_cursor: str | None
