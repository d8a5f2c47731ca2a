"""Engine turns: the user's words in, the reply out; answers, stops, drafts and the cost ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import MAX_TEXT, Strict
from api.schemas.nodes import NodeResponse


class PostTurnRequest(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="the user's words")
    parent_id: UUID | None = Field(None, description="defaults to the story's leaf")


class RegenerateRequest(Strict):
    user_id: UUID | None = Field(None, description="the user node to answer again; defaults to the leaf's")


class AnswerRequest(Strict):
    answer: str = Field(min_length=1, max_length=2000, description="one of the options, or the user's own words")


class AskModel(BaseModel):
    ask_id: str
    question: str
    options: list[str]


class ToolActivity(BaseModel):
    name: str
    ok: bool
    result: str


class TurnResponse(BaseModel):
    """A turn's outcome (the JSON form; `Accept: text/event-stream` streams the same as events)."""

    story_id: UUID
    reply: NodeResponse
    outcome: Literal["sealed", "asked", "revised", "stopped", "error"]
    ask: AskModel | None = None
    tools: list[ToolActivity]
    error: dict[str, Any] | None = None


class StopResponse(BaseModel):
    reply: NodeResponse
    was_running: bool


class DraftVersionModel(BaseModel):
    version: int
    operation: str
    text: str
    direct: bool
    at: datetime


class DraftResponse(BaseModel):
    node_id: UUID
    phase: str
    version: int
    text: str
    sealed_version: int | None
    versions: list[DraftVersionModel]
    asks: list[dict[str, Any]]
    refusals: list[dict[str, str]]
    stopped: dict[str, str] | None
    revisions: list[dict[str, Any]]


class CostLine(BaseModel):
    purpose: str
    model: str
    calls: int
    ok: int
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float


class CostsResponse(BaseModel):
    lines: list[CostLine]
    calls: int
    prompt_tokens: int
    completion_tokens: int
