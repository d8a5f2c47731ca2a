"""The scene on the write side: the scribe's patch of a reply, and a user's edit of the scene at a node.

A patch is recorded on the node it was computed for, never on "the current leaf"; the scribe's comes
at most once per reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from domain.aggregates import CommandGroup, Written
from domain.errors import ScenePatchError
from domain.language import Language
from domain.tree.commands.base import TreeAggregates
from domain.tree.commands.jobs import JobCommands, Settled, SideCall
from domain.tree.rules.scene import PatchResult, Roster, SceneSnapshot, apply_patch, canonical_patch
from domain.values import NodeView


class SceneLookup(Protocol):
    """The scene as it stands at a node, answered by the scene read model."""

    def state_at(self, node_id: UUID) -> tuple[SceneSnapshot, Roster]:
        """The snapshot and roster at the node (empty ones when nothing on its path was patched)."""
        ...


@dataclass(frozen=True, slots=True)
class ScribeBrief:
    """What the scribe reads of a turn: the reply, the user's words before it, and the two names."""

    reply: NodeView
    user: NodeView
    card_name: str
    user_name: str
    language: Language = "zh"


@dataclass(frozen=True, slots=True)
class SceneEdited:
    """A user's edit as recorded: the node it is on, what the merge rules made of it, the position."""

    node: NodeView
    merged: PatchResult
    position: int


class SceneCommands(CommandGroup[TreeAggregates]):
    def __init__(self, app: TreeAggregates, jobs: JobCommands) -> None:
        super().__init__(app)
        self.jobs = jobs  # (the scribe's patch settles its job)

    def scribe_brief(self, node_id: UUID) -> ScribeBrief | None:
        """The inputs of the scribe job for a reply; None when the node is not a finished reply."""
        reply = self.app.node(node_id)
        if reply.kind != "reply" or reply.phase not in ("final", "sealed") or reply.parent_id is None:
            return None
        story = self.app.story_of(reply)
        card, settings = self.app.card_of(story).data, self.app.settings(story)
        language = card.language(settings.language)
        return ScribeBrief(reply, self.app.node(reply.parent_id), card.name, settings.user_name, language)

    def record_scribe_patch(
        self, node_id: UUID, patch: dict[str, Any], warnings: list[str], call: SideCall | None
    ) -> Settled:
        return self.jobs.settle(node_id, "scribe", call, lambda node: node.patch_scene("scribe", patch, warnings))

    def scene_target(self, tenant_id: str, story_id: UUID, node_id: UUID | None) -> NodeView:
        """The node a scene read or edit is about (default: the story's leaf), checked to be the story's."""
        return self.app.leaf_or(self.app.story(tenant_id, story_id), node_id, "at").view

    def edit_scene(
        self, tenant_id: str, story_id: UUID, node_id: UUID | None, patch: dict[str, Any], scenes: SceneLookup
    ) -> SceneEdited:
        """A user's patch to the scene at a node of the story (default: the leaf), merged by the scribe's
        rules into the scene as it stands there: refused whole when nothing in it applies, otherwise
        recorded with the warnings for the parts that did not."""
        story = self.app.story(tenant_id, story_id)
        node = self.app.leaf_or(story, node_id, "at")
        snapshot, roster = scenes.state_at(node.id)
        names = [self.app.card_of(story).data.name, self.app.settings(story).user_name]
        known = [*names, *snapshot.characters, *roster.characters]
        patch = canonical_patch(patch, known)
        merged = apply_patch(snapshot, roster, patch, known, allow_roster=True)
        if not merged.applied:
            detail = "; ".join(merged.warnings) or "the patch is empty"
            raise ScenePatchError(f"nothing in the patch could be applied: {detail}")
        written = self.record_scene_edit(tenant_id, story_id, node.id, patch, merged.warnings)
        return SceneEdited(written.value, merged, written.position)

    def record_scene_edit(
        self, tenant_id: str, story_id: UUID, node_id: UUID, patch: dict[str, Any], warnings: list[str]
    ) -> Written[NodeView]:
        """Record a user's patch at a node as given, with the warnings the merge rules gave it
        (`edit_scene` decides both; scripts that replay edits call this)."""
        node = self.app.story_node(self.app.story(tenant_id, story_id), node_id, "at")
        with self.app.evicting(node):
            node.patch_scene("user", patch, warnings)
            return Written(node.view, self.app.commit(node))
