"""The events of a card's memory: a story's recap written or edited, a merge of the recaps into the handbook
and the resident summary, a user's edit of either, a story forgotten or remembered again. Immutable facts
in the past tense; their topics are forever (`domain/topics.py`)."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from eventsourcing.domain import AggregateCreated, AggregateEvent

from domain.folded import Folded

MemoryAuthor = Literal["model", "offline"]  # who wrote a recap or a merge: the side model, or the offline rules
ForgetReason = Literal["deleted", "asked"]  # the story was deleted, or the user asked to forget it


class CardMemoryBegun(Folded, AggregateCreated):
    """The memory of a card began (at the first recap of one of its stories)."""

    tenant_id: str
    card_id: UUID


class RecapWritten(Folded, AggregateEvent):
    """A story's recap, read from its current path: `fingerprint` names what it read (a recap for the
    same fingerprint is never written twice), `first_node_id`..`last_node_id` the span of the path read
    word for word (the story's summaries stood for what came before it), `turns` the user's turns read,
    `omitted_chars` what was cut to fit the input; `version` counts this story's recaps (edits too)."""

    story_id: UUID
    version: int
    text: str
    fingerprint: str
    first_node_id: UUID | None
    last_node_id: UUID | None
    turns: int
    omitted_chars: int
    author: MemoryAuthor
    model: str
    prompt_tokens: int
    completion_tokens: int


class RecapEdited(Folded, AggregateEvent):
    """A user rewrote a story's recap: valid memory, never rewritten by a later automatic recap."""

    story_id: UUID
    version: int
    text: str


class MemoryMerged(Folded, AggregateEvent):
    """The recaps merged into the handbook (`handbook`: its story blocks and its tagged items, as data)
    and the resident summary; `recaps`: the version of each story's recap the merge read (by story id),
    `forgotten`: the stories it left out because they were forgotten."""

    handbook: dict[str, Any]
    resident: str
    recaps: dict[str, int]
    forgotten: list[UUID]
    author: MemoryAuthor
    model: str
    prompt_tokens: int
    completion_tokens: int


class HandbookEdited(Folded, AggregateEvent):
    """A user rewrote the handbook; its items are kept by every later merge while a story behind them is."""

    handbook: dict[str, Any]


class ResidentEdited(Folded, AggregateEvent):
    """A user rewrote the resident summary; later merges keep it as written."""

    text: str


class StoryForgotten(Folded, AggregateEvent):
    """A story's memory is to be forgotten: its recap leaves the next merge, and the items only it
    supports leave the handbook."""

    story_id: UUID
    reason: ForgetReason


class StoryRemembered(Folded, AggregateEvent):
    """A forgotten story (one deleted, then restored) comes back: its recap goes into the next merge."""

    story_id: UUID
