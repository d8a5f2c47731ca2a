"""Composite writes: a domain command and what the service decides because of it, in one call on the
writer thread (one hop, one position to wait for)."""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

from domain.application import Changji
from domain.tree.commands.stories import Appended
from domain.tree.node import Node
from domain.values import NodeKind
from service.views import StoryViews


class StoryWrites:
    def __init__(self, app: Changji, views: StoryViews) -> None:
        self.app, self.views = app, views

    def append_node(
        self,
        tenant_id: str,
        story_id: UUID,
        node_id: UUID,
        kind: NodeKind,
        text: str,
        parent_id: UUID | None,
        expected_version: int | None,
    ) -> Appended:
        """Append a node; a reply after which the context would leave turns out for the budget announces
        a compaction there and then (so a read of the context never writes)."""
        appended = self.app.stories.append_node(tenant_id, story_id, node_id, kind, text, parent_id, expected_version)
        if kind != "reply":
            return appended
        packed = self.views.pack_if_over_budget(tenant_id, story_id, appended.node.id)
        return replace(appended, position=packed) if packed else appended

    def appended(self, tenant_id: str, story_id: UUID, node_id: UUID) -> Appended | None:
        """The node `node_id` of the story, as an append's answer, if it exists (else None)."""
        if not self.app.exists(Node, node_id):
            return None
        story, node = self.app.owned_node(tenant_id, node_id)
        if story.id != story_id:
            return None
        return Appended(node.view, story.version, 0)
