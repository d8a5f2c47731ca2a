"""Composite writes: a domain command and what the service decides because of it, in one call on the
writer thread (one hop, one position to wait for)."""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID, uuid4

from domain.application import Changji
from domain.commands.stories import Appended
from domain.values import NodeKind
from service.views import StoryViews


class StoryWrites:
    def __init__(self, app: Changji, views: StoryViews) -> None:
        self.app, self.views = app, views

    def append_node(
        self,
        tenant_id: str,
        story_id: UUID,
        kind: NodeKind,
        text: str,
        parent_id: UUID | None,
        expected_version: int | None,
    ) -> Appended:
        """Append a node; a reply after which the context would leave turns out for the budget announces
        a compaction there and then (so a read of the context never writes)."""
        appended = self.app.stories.append_node(tenant_id, story_id, uuid4(), kind, text, parent_id, expected_version)
        if kind != "reply":
            return appended
        packed = self.views.pack_if_over_budget(tenant_id, story_id, appended.node.id)
        return replace(appended, position=packed) if packed else appended
