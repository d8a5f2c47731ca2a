"""The story's and its nodes' events: a play-through, its save points, the nodes and their annotations.
Immutable facts in the past tense; their topics are forever (`domain/topics.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import AggregateCreated, AggregateEvent

from domain.folded import Folded
from domain.values import LeafCause

# --- story ------------------------------------------------------------------------------------


class StoryStarted(Folded, AggregateCreated):
    """A play-through of a card began at its greeting node."""

    tenant_id: str
    card_id: UUID
    title: str
    root_id: UUID
    settings: dict[str, Any]


class PreludeCarried(Folded, AggregateEvent):
    """The story opens with what an earlier story left: `text`, that story's recap (the card memory's when
    it had read that path, else the offline rules'), read from its path ending at `from_node_id`."""

    from_story_id: UUID
    from_node_id: UUID
    text: str


class ChatImported(Folded, AggregateEvent):
    """The story was imported from another system's chat log: what the file was (`source`: format, its
    header verbatim, the greeting's alternatives, warnings) and how many nodes it made."""

    source: dict[str, Any]
    nodes: int


class LeafMoved(Folded, AggregateEvent):
    """The story's current position moved to a node (an append, a checkout, a regenerate)."""

    node_id: UUID
    cause: LeafCause


class StoryMovedToCard(Folded, AggregateEvent):
    """The story now belongs to another card of its tenant (its card was merged into that one): its
    contexts read that card's fields and settings from here on. `from_card_id`: the card it left."""

    card_id: UUID
    from_card_id: UUID


class StoryConfigured(Folded, AggregateEvent):
    """The story's setting overrides were replaced."""

    settings: dict[str, Any]


class StoryRetitled(Folded, AggregateEvent):
    """The story was given a new title."""

    title: str


class SavePointMarked(Folded, AggregateEvent):
    """A named save was made at a node, extending a world line or forking a new one."""

    save_id: str
    name: str
    node_id: UUID
    worldline_id: str
    worldline_name: str
    parent_save_id: str | None
    fork_from_save_id: str | None


class SavePointDeleted(Folded, AggregateEvent):
    """A save point was removed from the list (the tree keeps its node)."""

    save_id: str


class WorldLineRenamed(Folded, AggregateEvent):
    """A world line got a new display name."""

    worldline_id: str
    name: str


class StoryDeleted(Folded, AggregateEvent):
    """The story was deleted by its owner: out of every listing and read, its events kept."""


class StoryRestored(Folded, AggregateEvent):
    """A deleted story was brought back by its owner, as it was when deleted."""


# --- node -------------------------------------------------------------------------------------


class GreetingPlaced(Folded, AggregateCreated):
    """The story's root: the card's chosen greeting, spoken by the character."""

    story_id: UUID
    text: str
    greeting_index: int


class UserSpoke(Folded, AggregateCreated):
    """The user said something, under a greeting or a reply."""

    story_id: UUID
    parent_id: UUID
    text: str
    depth: int
    turn: int
    said_at: datetime | None = None  # when it was said, if before it was recorded (an imported chat)


class ReplyPosted(Folded, AggregateCreated):
    """A finished reply arrived from the client's own model (bring-your-own mode), sealed on arrival."""

    story_id: UUID
    parent_id: UUID
    text: str
    depth: int
    turn: int
    said_at: datetime | None = None  # when it was said, if before it was recorded (an imported chat)


class ReplyRevised(Folded, AggregateEvent):
    """The text of a sealed reply (or greeting) was revised in place; earlier texts stay in history."""

    text: str
    reason: str


class NodeStarred(Folded, AggregateEvent):
    """The node became an anchor: it is quoted verbatim by summaries and never dropped."""


class NodeUnstarred(Folded, AggregateEvent):
    """The node stopped being an anchor."""


class NodeHidden(Folded, AggregateEvent):
    """The node was left out of contexts; it stays in the tree and in search."""


class NodeUnhidden(Folded, AggregateEvent):
    """The node came back into contexts."""
