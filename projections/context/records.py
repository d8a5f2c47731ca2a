"""What an assembled context is made of: OpenAI messages and the explain list of where each part came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from domain.language import Language

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class LoreRef:
    """A lore entry a context holds, and why: the key (and secondary key) that fired it, or constant; or an
    entry whose key fired and that was left out, and why (`left_out`, `detail`). `roll`: its probability draw."""

    book_id: str
    uid: int
    title: str
    key: str | None
    secondary: str | None
    constant: bool
    left_out: str | None = None
    detail: str | None = None
    roll: float | None = None
    sticky: bool = False


@dataclass(frozen=True, slots=True)
class MemoryRef:
    """A passage of the card's memory a context holds: a handbook item or a recap's line, and the stories
    behind it."""

    key: str
    kind: str  # item | recap
    sources: tuple[UUID, ...]


@dataclass(frozen=True, slots=True)
class ExplainBlock:
    """One part of an assembled context: what it is, why it is there, which nodes, how big."""

    what: str
    why: str
    node_ids: tuple[UUID, ...] = ()
    chars: int = 0
    tokens: int = 0
    message_index: int | None = None
    covers: tuple[int, int] | None = None  # summaries and cuts: the depth range of the path they stand for
    scores: tuple[float, ...] = ()  # recall: each passage's fused score, in the order of node_ids
    # where the block is: characters [start, end) of messages[message_index] — for a block running over
    # several messages (the verbatim turns), from `start` in message_index to `end` in end_message
    span: tuple[int, int] | None = None
    end_message: int | None = None
    lore: tuple[LoreRef, ...] = ()  # lore: the entries in the block, each with what fired it
    version: int | None = None  # the resident summary: the version of the card's memory it is from
    memory: tuple[MemoryRef, ...] = ()  # the card memory's passages in the block, each with its stories


@dataclass(frozen=True, slots=True)
class TailBlock:
    """A block put into the last user message, before the user's words."""

    what: str
    why: str
    text: str
    node_ids: tuple[UUID, ...] = ()
    scores: tuple[float, ...] = ()
    tokens: int | None = None  # as the block counted itself, line by line, when it was made (None: count the text)
    lore: tuple[LoreRef, ...] = ()
    memory: tuple[MemoryRef, ...] = ()


@dataclass(frozen=True, slots=True)
class DepthBlock:
    """Lore placed in the chat: `depth` messages from the end, in a message of `role`'s side (system and user
    texts in a user message, assistant texts in a reply)."""

    depth: int
    role: str
    text: str
    why: str
    lore: tuple[LoreRef, ...] = ()


@dataclass(frozen=True, slots=True)
class Context:
    messages: tuple[Message, ...]
    explain: tuple[ExplainBlock, ...]
    tokens: int
    budget: int
    leaf_id: UUID
    cut_turns: int = 0
    cut_nodes: int = 0
    language: Language = "zh"  # of changji's own texts in it
