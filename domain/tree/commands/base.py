"""What the story tree's commands need of the application: the card room's lookups, and a tenant's
stories and their nodes (views cached by the application, aggregates loaded on demand)."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from domain.card.card import Card
from domain.card.commands.base import CardAggregates
from domain.language import Language
from domain.tree.node import Node
from domain.tree.story import Story
from domain.values import NodeView, StorySettings


class TreeAggregates(CardAggregates, Protocol):
    def story(self, tenant_id: str, story_id: UUID) -> Story:
        """The tenant's live story (StoryNotFoundError otherwise)."""
        ...

    def node(self, node_id: UUID) -> NodeView:
        """A node's current view, without any ownership check."""
        ...

    def held_view(self, node_id: UUID) -> NodeView | None:
        """The node's view if this process holds it (no read of the store)."""
        ...

    def node_aggregate(self, node_id: UUID) -> Node:
        """A node's aggregate, without any ownership check."""
        ...

    def story_node(self, story: Story, node_id: UUID, field: str = "node_id") -> Node:
        """A node of this story; `field` names the request input it came from, for error messages."""
        ...

    def leaf_or(self, story: Story, node_id: UUID | None, field: str = "node_id") -> Node:
        """The given node of the story, or its leaf."""
        ...

    def owned_node(self, tenant_id: str, node_id: UUID) -> tuple[Story, Node]:
        """A node of one of the tenant's live stories, with its story."""
        ...

    def settings(self, story: Story) -> StorySettings:
        """The card's settings with the story's overrides."""
        ...

    def language(self, story: Story) -> Language:
        """The language of changji's own texts in the story's prompts."""
        ...

    def card_of(self, story: Story) -> Card:
        """The story's card, even if the card was deleted after the story began."""
        ...

    def story_of(self, node: NodeView) -> Story:
        """The story a node belongs to, without any ownership check."""
        ...
