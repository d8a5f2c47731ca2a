"""Events of an engine turn: a reply written by the main model through its draft tools, on the reply's
node. Immutable facts in the past tense; their topics are forever (`domain/topics.py`)."""

from __future__ import annotations

from uuid import UUID

from eventsourcing.domain import AggregateCreated, AggregateEvent

from domain.folded import Folded
from domain.values import CallPurpose, StopReason

# --- engine turns: a reply written by the main model through draft tools ------------------------


class ReplyOpened(Folded, AggregateCreated):
    """changji began writing a reply with the main model: an empty draft at version 0."""

    story_id: UUID
    parent_id: UUID
    depth: int
    turn: int
    model: str


class ClientPartNoted(Folded, AggregateEvent):
    """This reply answers a front end's request through the chat-completions proxy (or, noted again, a
    request that continued it); the front end's own part of what the upstream got — its system messages
    before the chat, its blocks inside and after it, the words it had the reply start with — is kept as
    the blob `client_part` names (the SHA-256 of a list of the blobs of its texts; `projections/context/
    relayed.py`)."""

    client_part: str


class SearchTermsNoted(Folded, AggregateEvent):
    """The side model was asked to write the user's words at this node as a search of the story's memory:
    `terms`, one line recall ranks beside the words themselves ("" where its answer held none it could use,
    or none came in time: then it is not asked again for these words)."""

    terms: str


class DraftWritten(Folded, AggregateEvent):
    """The whole draft was replaced; `version` is the draft's new version."""

    version: int
    text: str
    direct: bool


class DraftAppended(Folded, AggregateEvent):
    """Text was added to the end of the draft."""

    version: int
    text: str
    separator: str
    direct: bool


class DraftEdited(Folded, AggregateEvent):
    """A batch of quote→replacement edits was applied, all against the previous version."""

    version: int
    edits: list[dict[str, str]]


class DraftRead(Folded, AggregateEvent):
    """The model read (part of) the draft at a version."""

    version: int
    start: int | None
    end: int | None


class DraftSearched(Folded, AggregateEvent):
    """The model searched the draft."""

    version: int
    query: str
    hits: int


class DraftRefused(Folded, AggregateEvent):
    """A tool call was refused (stale version, bad quote, malformed arguments …); nothing changed."""

    tool: str
    reason: str


class ReplySealed(Folded, AggregateEvent):
    """The draft was sealed at a version: the turn's reply is final."""

    version: int


class TurnAsked(Folded, AggregateEvent):
    """The model paused the turn with a decision card (2–4 options) for the user."""

    ask_id: str
    question: str
    options: list[str]


class AskAnswered(Folded, AggregateEvent):
    """The user answered the decision card; the turn may resume."""

    ask_id: str
    answer: str


class TurnStopped(Folded, AggregateEvent):
    """The turn ended without a seal (stopped, disconnected, failed, runaway); the draft is kept unsealed."""

    reason: StopReason
    detail: str


class PreviousReplyRead(Folded, AggregateEvent):
    """The model read the previous sealed reply (`target_id`) at its text version, before revising it."""

    target_id: UUID
    version: int


class MemorySearched(Folded, AggregateEvent):
    """The model's `memory_search` tool searched the story's memory for `query` and answered with
    `found`, in the order listed (story order): for each passage, `node_id` (the reply of its turn, or
    the last node an episode summary covers), `kind` ("turn" or "episode") and `line`, the text the
    tool's answer gave word for word (what the model was told, whatever the archive holds later)."""

    query: str
    found: list[dict[str, str]]


class ReplyWithdrawn(Folded, AggregateEvent):
    """This turn revised the previous reply instead of writing a new one; the opened reply is set aside."""

    target_id: UUID
    reason: str


class ModelCalled(Folded, AggregateEvent):
    """One call to a model on behalf of this node: for the cost ledger."""

    purpose: CallPurpose
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    outcome: str
