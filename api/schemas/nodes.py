"""Nodes: append, revise, hide and unhide many; a node, its tree, its path."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from api.schemas.common import MAX_TEXT, Strict
from domain.values import NodeView


class AppendNodeRequest(Strict):
    kind: Literal["user", "reply"]
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    parent_id: UUID | None = Field(None, description="defaults to the story's leaf")


class NodeResponse(BaseModel):
    id: UUID
    story_id: UUID
    parent_id: UUID | None
    kind: str
    depth: int
    turn: int
    text: str
    hidden: bool
    starred: bool
    revisions: int
    phase: str = Field(
        description="final (written whole), or an engine reply's writing/waiting/sealed/stopped/withdrawn"
    )
    draft_version: int
    version: int
    created_at: datetime
    search_terms: str | None = Field(
        None,
        description="the user's words as the side model wrote them into a search of the memory (recall_rewrite;"
        ' "": asked, none it could use; null: not asked)',
    )

    @classmethod
    def of(cls, node: NodeView) -> NodeResponse:
        return cls.model_validate(node, from_attributes=True)


class AppendNodeResponse(BaseModel):
    node: NodeResponse
    story_version: int
    regenerated: bool = Field(description="true when the node is a new sibling of an existing reply")


class CheckoutRequest(Strict):
    node_id: UUID


class LeafResponse(BaseModel):
    story_id: UUID
    leaf_id: UUID
    story_version: int


class ReviseRequest(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    reason: str = Field("", max_length=500)


class NodeIdsRequest(Strict):
    node_ids: list[UUID] = Field(min_length=1, max_length=1000)


class NodeIdsResponse(BaseModel):
    node_ids: list[UUID]


class TreeNode(BaseModel):
    id: UUID
    parent_id: UUID | None
    kind: str
    phase: str
    depth: int
    turn: int
    hidden: bool
    starred: bool
    revisions: int
    chars: int
    preview: str
    created_at: datetime


class TreeResponse(BaseModel):
    story_id: UUID
    leaf_id: UUID
    nodes: list[TreeNode]
    next_cursor: str | None


class NodeListResponse(BaseModel):
    nodes: list[NodeResponse]


class PathResponse(BaseModel):
    story_id: UUID
    leaf_id: UUID
    nodes: list[NodeResponse]
    truncated: bool = Field(description="true when `limit` left older nodes out")
