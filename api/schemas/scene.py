"""The scene at a node and its edits; background jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import Strict
from domain.values import JobKind, SceneAuthor


class ScenePatchModel(BaseModel):
    seq: int
    author: SceneAuthor
    patch: dict[str, Any]
    warnings: list[str]
    at: datetime


class SceneText(BaseModel):
    state: str = Field(description="the body of the 【世界状态】 block")
    roster: str = Field(description="the body of the 【登场名录】 block")


class SceneResponse(BaseModel):
    story_id: UUID
    at: UUID = Field(description="the node the scene is for")
    source_node_id: UUID | None = Field(description="the nearest patched node on the path (None: nothing yet)")
    state: dict[str, Any] = Field(description="time, location, characters, inventory, flags, plot_threads")
    roster: dict[str, dict[str, str]] = Field(description="characters, places, items, events → first in-story time")
    present: list[str] = Field(description="characters whose `at` is the scene's location")
    text: SceneText
    patches: list[ScenePatchModel] = Field(description="the patches recorded on this node itself, oldest first")


PATCH_KEYS = ("time", "location", "characters", "inventory", "flags", "plot_threads", "roster")


class EditSceneRequest(Strict):
    patch: dict[str, Any] = Field(
        min_length=1,
        description="fields of the scene (time, location, characters, inventory, flags, plot_threads) and/or "
        "`roster` ({table: {name: time | null}}), merged by the scribe's rules: a part they refuse is a warning,"
        " a patch none of whose parts apply is refused (422)",
        json_schema_extra={"properties": {key: {"description": f"the scene's {key}"} for key in PATCH_KEYS}},
    )
    at: UUID | None = Field(None, description="the node to patch (default: the leaf)")


class EditSceneResponse(SceneResponse):
    applied: list[str]
    warnings: list[str] = Field(description="parts of the patch the merge rules refused")


JobStatus = Literal["pending", "running", "retrying", "done", "skipped", "failed"]
"""A job's state as recorded, or `running` while this process runs it."""


class JobModel(BaseModel):
    id: str = Field(description="`<kind>:<node id>`: stable, one per kind and node")
    kind: JobKind
    node_id: UUID
    story_id: UUID
    status: JobStatus = Field(description="pending, retrying, done, skipped, failed as recorded; running while it runs")
    attempts: int = Field(description="failed attempts so far")
    detail: str = Field(description="the skip reason or the last error")
    next_at: datetime | None = Field(description="when it runs (next), if it is still due")
    created_at: datetime
    updated_at: datetime
    seq: int


class JobListResponse(BaseModel):
    items: list[JobModel]
    next_cursor: str | None


class StoryJobsResponse(BaseModel):
    story_id: UUID
    counts: dict[JobStatus, int] = Field(description="the story's jobs by status (running counted apart from pending)")
    settled: bool = Field(
        description="no job of the story is pending, retrying or running: its background work is done"
    )
