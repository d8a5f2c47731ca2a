"""A card's memory across its stories: the handbook with each item's sources, the resident summary, the
recaps, and what a sync did."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field


class MemoryItemModel(BaseModel):
    item_id: str = Field(description="stable while its section and words are")
    section: Literal["characters", "facts", "preferences"]
    text: str
    sources: list[UUID] = Field(description="the stories whose recaps support it")


class StoryBlockModel(BaseModel):
    story_id: UUID
    title: str
    text: str


class HandbookModel(BaseModel):
    blocks: list[StoryBlockModel]
    items: list[MemoryItemModel]
    text: str = Field(description="the handbook as text, in the card's language, each item tagged with its stories")


class RecapModel(BaseModel):
    story_id: UUID
    version: int = Field(description="this story's recaps so far (the user's edits too)")
    text: str
    fingerprint: str = Field(description="what the recap read: the story's path when it was written")
    first_node_id: UUID | None = Field(description="the span of the path it read, first node")
    last_node_id: UUID | None = Field(description="…and last node (the leaf then)")
    turns: int
    author: Literal["model", "offline", "user"]
    written_at: datetime
    forgotten: bool


class CardMemoryResponse(BaseModel):
    card_id: UUID
    version: int = Field(description="the memory's version (0: none of the card's stories was recapped yet)")
    handbook: HandbookModel
    resident: str = Field(description="the resident summary a new story of the card starts with")
    recaps: list[RecapModel]
    merge_due: bool = Field(description="a recap changed, or a story was forgotten, since the last merge")


class SyncMemoryResponse(BaseModel):
    recapped: int = Field(description="stories recapped now")
    forgotten: int = Field(description="deleted stories forgotten now")
    remembered: int = Field(description="restored stories remembered now")
    merged: bool
    memory: CardMemoryResponse
