"""Background work on the write side: outcomes of side jobs and scene patches, recorded on the node
they were computed for (never on "the current leaf").

A mixin of `Changji`. Recording is idempotent: a job whose node already holds its final outcome
records nothing more than the model call it made, so running a job twice is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.commanding import AppCommands
from domain.errors import NodeNotFoundError, StoryNotFoundError
from domain.node import Node
from domain.story import Story
from domain.values import NodeView


@dataclass(frozen=True, slots=True)
class SideCall:
    """One side-model call, for the cost ledger."""

    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    outcome: str


@dataclass(frozen=True, slots=True)
class Settled:
    """What recording a job outcome did: `recorded` is False when the node already had its outcome."""

    recorded: bool
    position: int
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class ScribeBrief:
    """What the scribe reads of a turn: the reply, the user's words before it, and the two names."""

    reply: NodeView
    user: NodeView
    card_name: str
    user_name: str


class SceneCommands(AppCommands):
    """Mixed into `Changji`, which provides the loading and saving helpers declared here."""

    def scribe_brief(self, node_id: UUID) -> ScribeBrief | None:
        """The inputs of the scribe job for a reply; None when the node is not a finished reply."""
        reply = self.node(node_id)
        if reply.kind != "reply" or reply.phase not in ("final", "sealed") or reply.parent_id is None:
            return None
        story = self._get(Story, reply.story_id, StoryNotFoundError)
        return ScribeBrief(
            reply, self.node(reply.parent_id), self.card_of(story).data.name, self.settings(story).user_name
        )

    def job_node(self, node_id: UUID) -> Node:
        return self._get(Node, node_id, NodeNotFoundError)

    def _settle(self, node_id: UUID, kind: str, call: SideCall | None, decide: Any) -> Settled:
        node = self.job_node(node_id)
        settled = node.job_settled(kind)
        with self._command(node):
            if call is not None:
                node.record_call(
                    call.purpose, call.model, call.prompt_tokens, call.completion_tokens, call.latency_ms, call.outcome
                )
            attempt = 0 if settled else decide(node)
            if not node.pending_events:
                return Settled(False, 0)
            return Settled(not settled, self._save(node), attempt or 0)

    def record_scribe_patch(
        self, node_id: UUID, patch: dict[str, Any], warnings: list[str], call: SideCall | None
    ) -> Settled:
        return self._settle(node_id, "scribe", call, lambda node: node.patch_scene("scribe", patch, warnings))

    def record_job_failure(
        self, node_id: UUID, kind: str, error: str, retry_at: datetime | None, call: SideCall | None
    ) -> Settled:
        return self._settle(node_id, kind, call, lambda node: node.fail_job(kind, error, retry_at))

    def record_job_skip(self, node_id: UUID, kind: str, reason: str, call: SideCall | None = None) -> Settled:
        return self._settle(node_id, kind, call, lambda node: node.skip_job(kind, reason))

    def record_job_skips(self, node_ids: list[UUID], kind: str, reason: str) -> Settled:
        """The same skip for many nodes in one transaction (work that is not done at all, e.g. with no
        side model configured); nodes that already have their outcome are left alone."""
        nodes = [node for node in map(self.job_node, node_ids) if not node.job_settled(kind)]
        with self._command(*nodes):
            for node in nodes:
                node.skip_job(kind, reason)
            return Settled(bool(nodes), self._save(*nodes) if nodes else 0)

    def edit_scene(
        self, tenant_id: str, story_id: UUID, node_id: UUID | None, patch: dict[str, Any], warnings: list[str]
    ) -> tuple[NodeView, int]:
        """A user's patch to the scene at a node of the story (default: the leaf)."""
        story = self.story(tenant_id, story_id)
        assert story.leaf_id is not None
        node = self.story_node(story, node_id or story.leaf_id, "at")
        with self._command(node):
            node.patch_scene("user", patch, warnings)
            return node.view, self._save(node)

    def scene_target(self, tenant_id: str, story_id: UUID, node_id: UUID | None) -> NodeView:
        """The node a scene read or edit is about (default: the story's leaf), checked to be the story's."""
        story = self.story(tenant_id, story_id)
        assert story.leaf_id is not None
        return self.story_node(story, node_id or story.leaf_id, "at").view
