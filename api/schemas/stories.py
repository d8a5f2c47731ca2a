"""Stories: create, configure, list; chats imported; save points and world lines; search and replay."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import SettingsOverrides, Strict


class CreateStoryRequest(Strict):
    card_id: UUID
    greeting_index: int = Field(0, ge=0, description="0 = first_mes, n = alternate_greetings[n-1]")
    title: str = Field("", max_length=200)
    settings: SettingsOverrides = Field(default_factory=SettingsOverrides)
    carry_from: UUID | None = Field(
        None,
        description="an earlier story of yours: the new story opens with its recap in its 【前情提要】 message (the"
        " card memory's when it read that story's current path, else one by the offline rules)",
    )


class UpdateStoryRequest(Strict):
    title: str | None = Field(None, min_length=1, max_length=200)
    settings: SettingsOverrides | None = None


class StoryResponse(BaseModel):
    id: UUID
    version: int
    card_id: UUID
    title: str
    root_id: UUID
    leaf_id: UUID
    settings: dict[str, Any] = Field(description="effective settings (card defaults + story overrides)")
    overrides: dict[str, Any]
    carried_from: UUID | None = Field(None, description="the earlier story whose recap this one opened with")
    saves: int
    relayed: bool = Field(
        False, description="a front end's chat: its replies answered it through the chat-completions proxy"
    )
    created_at: datetime
    updated_at: datetime


class StorySummary(BaseModel):
    id: UUID
    card_id: UUID
    card_name: str = Field(
        "", description="the card's name (a card the proxy made is named from what the front end sent)"
    )
    title: str
    leaf_id: UUID
    last_words: str = Field("", description="the first 200 characters of the leaf's text: which chat this is")
    nodes: int
    relayed: bool = Field(False, description="a front end's chat, kept through the chat-completions proxy")
    created_at: datetime
    updated_at: datetime


class StoryListResponse(BaseModel):
    items: list[StorySummary]
    next_cursor: str | None


class ImportChatResponse(BaseModel):
    story: StoryResponse
    steps: int = Field(description="nodes on the imported path (greeting left out)")
    nodes: int = Field(description="nodes made, siblings (swipes) included")
    warnings: list[str] = Field(description="the first 100")
    skipped_lines: list[int] = Field(
        description="lines that were not JSON objects (SillyTavern skips them too): the first 100"
    )
    warning_count: int
    skipped_count: int


class CreateSaveRequest(Strict):
    name: str | None = Field(None, min_length=1, max_length=200)
    node_id: UUID | None = Field(None, description="defaults to the story's leaf")


class SaveResponse(BaseModel):
    id: str
    name: str
    node_id: UUID
    worldline_id: str
    worldline_name: str
    parent_save_id: str | None
    fork_from_save_id: str | None
    on_current_path: bool
    created_at: datetime


class WorldLineModel(BaseModel):
    id: str
    name: str
    saves: list[SaveResponse]


class SavesResponse(BaseModel):
    story_id: UUID
    current_save_id: str | None
    worldlines: list[WorldLineModel]


class RenameWorldLineRequest(Strict):
    name: str = Field(min_length=1, max_length=200)


class SearchHitModel(BaseModel):
    node_id: UUID
    kind: str
    depth: int
    turn: int
    hidden: bool
    snippet: str


class SearchResponse(BaseModel):
    story_id: UUID
    query: str
    hits: list[SearchHitModel]


class EventModel(BaseModel):
    type: str
    originator_id: UUID
    version: int
    timestamp: datetime
    data: dict[str, Any]


class ReplayStep(BaseModel):
    node_id: UUID
    kind: str
    depth: int
    turn: int
    events: list[EventModel]
    context_messages: int
    context_tokens: int
    visible_nodes: int


class ReplayResponse(BaseModel):
    story_id: UUID
    at: UUID
    steps: list[ReplayStep]
    next_depth: int | None
