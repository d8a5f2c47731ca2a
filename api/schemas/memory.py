"""A card's memory across its stories: the handbook with each item's sources, the resident summary, the
recaps, and what a sync did."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import MAX_TEXT, Strict
from api.schemas.stories import EventModel


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
    merged_by: Literal["model", "offline"] | None = Field(
        None, description="who wrote the last merge: the side model, or the offline rules (None: no merge yet)"
    )
    merged_at: datetime | None = None


class SyncMemoryResponse(BaseModel):
    recapped: int = Field(description="stories recapped now")
    forgotten: int = Field(description="deleted stories forgotten now")
    remembered: int = Field(description="restored stories remembered now")
    merged: bool
    memory: CardMemoryResponse


class MemoryTextRequest(Strict):
    text: str = Field(max_length=MAX_TEXT, description="the new text, as the user wrote it")


class RecapTextRequest(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT, pattern=r"\S", description="the recap as the user wrote it")


class ForgetStoryRequest(Strict):
    story_id: UUID = Field(description="the story whose memory is to be forgotten (it stays forgotten if restored)")


class ItemSourceModel(BaseModel):
    story_id: UUID
    recap: RecapModel = Field(description="the recap behind the item, with the span of the story's path it read")


class MemoryItemAuditResponse(BaseModel):
    card_id: UUID
    item: MemoryItemModel
    sources: list[ItemSourceModel] = Field(description="for each story tagged on the item, its recap")


class MemoryHistoryResponse(BaseModel):
    card_id: UUID
    events: list[EventModel] = Field(description="the memory's events in order: recaps, merges, edits, forgetting")
    next_after: int | None = Field(description="the `after` of the next page (None: this was the last)")
