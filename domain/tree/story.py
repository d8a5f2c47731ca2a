"""The Story aggregate: one play-through of a card — its leaf pointer, settings and save points."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.errors import DomainError, SavePointNotFoundError
from domain.tree.events import (
    ChatImported,
    LeafMoved,
    PreludeCarried,
    SavePointDeleted,
    SavePointMarked,
    StoryConfigured,
    StoryDeleted,
    StoryMovedToCard,
    StoryRestored,
    StoryRetitled,
    StoryStarted,
    WorldLineRenamed,
)
from domain.tree.rules.worldlines import SavePlan
from domain.values import LeafCause, Prelude, SavePoint


class StoryStateError(DomainError):
    """The story cannot take this change as it stands."""


class Story(Aggregate):
    def __init__(self) -> None:
        self.tenant_id = ""
        self.card_id: UUID | None = None
        self.title = ""
        self.root_id: UUID | None = None
        self.leaf_id: UUID | None = None
        self.settings: dict[str, Any] = {}
        self.saves: dict[str, SavePoint] = {}
        self.worldline_names: dict[str, str] = {}
        self.deleted = False
        self.imported: dict[str, Any] | None = None  # an imported chat: where it came from
        self.imported_nodes = 0
        self.prelude: Prelude | None = None  # what an earlier story left, carried into this one's opening

    @classmethod
    def start(
        cls,
        story_id: UUID,
        tenant_id: str,
        card_id: UUID,
        title: str,
        root_id: UUID,
        settings: dict[str, Any],
    ) -> Story:
        story = cls._create(
            StoryStarted,
            id=story_id,
            tenant_id=tenant_id,
            card_id=card_id,
            title=title,
            root_id=root_id,
            settings=settings,
        )
        story.move_leaf(root_id, cause="start")
        return story

    def record_import(self, source: dict[str, Any], nodes: int) -> None:
        self.trigger_event(ChatImported, source=source, nodes=nodes)

    def move_leaf(self, node_id: UUID, cause: LeafCause) -> None:
        if node_id != self.leaf_id:
            self.trigger_event(LeafMoved, node_id=node_id, cause=cause)

    def configure(self, settings: dict[str, Any]) -> None:
        if settings != self.settings:
            self.trigger_event(StoryConfigured, settings=settings)

    def move_to_card(self, card_id: UUID) -> None:
        assert self.card_id is not None
        if card_id != self.card_id:
            self.trigger_event(StoryMovedToCard, card_id=card_id, from_card_id=self.card_id)

    def retitle(self, title: str) -> None:
        if title != self.title:
            self.trigger_event(StoryRetitled, title=title)

    def mark_save(self, save_id: str, name: str, node_id: UUID, plan: SavePlan) -> None:
        self.trigger_event(
            SavePointMarked,
            save_id=save_id,
            name=name,
            node_id=node_id,
            worldline_id=plan.worldline_id,
            worldline_name=plan.worldline_name,
            parent_save_id=plan.parent_save_id,
            fork_from_save_id=plan.fork_from_save_id,
        )

    def delete_save(self, save_id: str) -> None:
        self.save_point(save_id)
        self.trigger_event(SavePointDeleted, save_id=save_id)

    def rename_worldline(self, worldline_id: str, name: str) -> None:
        if not any(s.worldline_id == worldline_id for s in self.saves.values()):
            raise SavePointNotFoundError(f"no world line {worldline_id}", field="worldline_id")
        self.trigger_event(WorldLineRenamed, worldline_id=worldline_id, name=name)

    def delete(self) -> None:
        if not self.deleted:
            self.trigger_event(StoryDeleted)

    def restore(self) -> None:
        if self.deleted:
            self.trigger_event(StoryRestored)

    def save_point(self, save_id: str) -> SavePoint:
        try:
            return self.saves[save_id]
        except KeyError:
            raise SavePointNotFoundError(f"no save point {save_id}", field="save_id") from None

    def carry(self, from_story_id: UUID, from_node_id: UUID, text: str) -> None:
        """Open the story with what an earlier story left (once, before its first turn)."""
        if self.prelude is not None:
            raise StoryStateError("the story carries a prelude already")
        self.trigger_event(PreludeCarried, from_story_id=from_story_id, from_node_id=from_node_id, text=text)

    def worldline_name(self, save: SavePoint) -> str:
        return self.worldline_names.get(save.worldline_id, save.worldline_name)

    def when(self, event: Any) -> None:
        match event:
            case StoryStarted():
                self.tenant_id, self.card_id, self.title = event.tenant_id, event.card_id, event.title
                self.root_id, self.settings = event.root_id, dict(event.settings)
            case PreludeCarried():
                self.prelude = Prelude(event.from_story_id, event.from_node_id, event.text)
            case ChatImported():
                self.imported, self.imported_nodes = event.source, event.nodes
            case LeafMoved():
                self.leaf_id = event.node_id
            case StoryMovedToCard():
                self.card_id = event.card_id
            case StoryConfigured():
                self.settings = dict(event.settings)
            case StoryRetitled():
                self.title = event.title
            case SavePointMarked():
                self.saves[event.save_id] = SavePoint(
                    id=event.save_id,
                    name=event.name,
                    node_id=event.node_id,
                    worldline_id=event.worldline_id,
                    worldline_name=event.worldline_name,
                    parent_save_id=event.parent_save_id,
                    fork_from_save_id=event.fork_from_save_id,
                    created_at=event.timestamp,
                )
            case SavePointDeleted():
                del self.saves[event.save_id]
            case WorldLineRenamed():
                self.worldline_names[event.worldline_id] = event.name
            case StoryDeleted():
                self.deleted = True
            case StoryRestored():
                self.deleted = False
