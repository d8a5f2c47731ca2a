"""Every domain event: immutable facts in the past tense. Topics are `domain.events:<Name>`; never rename."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import AggregateCreated, AggregateEvent

from domain.values import (
    CallPurpose,
    CompactionReason,
    JobKind,
    LeafCause,
    SceneAuthor,
    StopReason,
    SummaryAuthor,
)

if TYPE_CHECKING:
    from eventsourcing.domain import Aggregate


class _Folded:
    """Hands every event to its aggregate's single fold method (`when`)."""

    def apply(self, aggregate: Aggregate) -> None:
        aggregate.when(self)  # type: ignore[attr-defined]


# --- card -------------------------------------------------------------------------------------


class CardCreated(_Folded, AggregateCreated):
    """A tenant created a character card with its memory settings."""

    tenant_id: str
    data: dict[str, Any]
    settings: dict[str, Any]


class CardUpdated(_Folded, AggregateEvent):
    """The card's fields or settings were replaced by a new revision."""

    data: dict[str, Any]
    settings: dict[str, Any]


class CardDeleted(_Folded, AggregateEvent):
    """The card was deleted; its stories remain readable until deleted themselves."""


class CardMerged(_Folded, AggregateEvent):
    """The card was merged into another card of its tenant (`into`): it leaves every listing as a deleted
    card does, its stories are moved there (each by its own `StoryMovedToCard`), its attached lorebooks
    are attached there, and a proxied chat that would make this card again goes to that one."""

    into: UUID


class CardImported(_Folded, AggregateCreated):
    """A tenant imported a character card from a file: its fields verbatim, its art and other files kept
    by content hash (`art`, `assets`: {path?, sha256, media_type, size}), and what the file was (`source`:
    container, spec, warnings)."""

    tenant_id: str
    data: dict[str, Any]
    settings: dict[str, Any]
    source: dict[str, Any]
    art: dict[str, Any] | None
    assets: list[dict[str, Any]]


class LorebookAttached(_Folded, AggregateEvent):
    """A stand-alone lorebook was attached to the card: its entries take part in the card's stories."""

    lorebook_id: UUID
    name: str


class LorebookDetached(_Folded, AggregateEvent):
    """The lorebook was detached from the card; its entries no longer take part."""

    lorebook_id: UUID


# --- lorebook ---------------------------------------------------------------------------------


class LorebookCreated(_Folded, AggregateCreated):
    """A lorebook was made for a card: a World Info file imported (`world_info`), or the card's supplement
    the model writes into (`supplement`). Entries and scan settings in changji's form; book fields it does
    not use kept verbatim in `extras`."""

    tenant_id: str
    card_id: UUID
    kind: str
    name: str
    format: str
    scan: dict[str, Any]
    entries: list[dict[str, Any]]
    extras: dict[str, Any]


class LoreEntryAdded(_Folded, AggregateEvent):
    """An entry was added: by the user, or by the model at a node of a story (`written_at`: story_id,
    node_id); `pending` when the card's write gate holds it for the user's approval."""

    entry: dict[str, Any]
    written_at: dict[str, Any] | None
    pending: bool


class LoreEntryChanged(_Folded, AggregateEvent):
    """An entry was replaced by a new revision (same uid)."""

    entry: dict[str, Any]


class LoreEntryRemoved(_Folded, AggregateEvent):
    """An entry was removed from the book."""

    uid: int


class LoreEntryDisabled(_Folded, AggregateEvent):
    """An entry was switched off: it stays in the book and activates no more."""

    uid: int


class LoreEntryEnabled(_Folded, AggregateEvent):
    """A switched-off entry was switched on again."""

    uid: int


class LoreEntryApproved(_Folded, AggregateEvent):
    """The user approved an entry the write gate held: it takes part from now on."""

    uid: int


class LorebookDeleted(_Folded, AggregateEvent):
    """The lorebook was deleted (detached from its card first)."""


# --- story ------------------------------------------------------------------------------------


class StoryStarted(_Folded, AggregateCreated):
    """A play-through of a card began at its greeting node."""

    tenant_id: str
    card_id: UUID
    title: str
    root_id: UUID
    settings: dict[str, Any]


class ChatImported(_Folded, AggregateEvent):
    """The story was imported from another system's chat log: what the file was (`source`: format, its
    header verbatim, the greeting's alternatives, warnings) and how many nodes it made."""

    source: dict[str, Any]
    nodes: int


class LeafMoved(_Folded, AggregateEvent):
    """The story's current position moved to a node (an append, a checkout, a regenerate)."""

    node_id: UUID
    cause: LeafCause


class StoryMovedToCard(_Folded, AggregateEvent):
    """The story now belongs to another card of its tenant (its card was merged into that one): its
    contexts read that card's fields and settings from here on. `from_card_id`: the card it left."""

    card_id: UUID
    from_card_id: UUID


class StoryConfigured(_Folded, AggregateEvent):
    """The story's setting overrides were replaced."""

    settings: dict[str, Any]


class StoryRetitled(_Folded, AggregateEvent):
    """The story was given a new title."""

    title: str


class SavePointMarked(_Folded, AggregateEvent):
    """A named save was made at a node, extending a world line or forking a new one."""

    save_id: str
    name: str
    node_id: UUID
    worldline_id: str
    worldline_name: str
    parent_save_id: str | None
    fork_from_save_id: str | None


class SavePointDeleted(_Folded, AggregateEvent):
    """A save point was removed from the list (the tree keeps its node)."""

    save_id: str


class WorldLineRenamed(_Folded, AggregateEvent):
    """A world line got a new display name."""

    worldline_id: str
    name: str


class StoryDeleted(_Folded, AggregateEvent):
    """The story was deleted by its owner: out of every listing and read, its events kept."""


class StoryRestored(_Folded, AggregateEvent):
    """A deleted story was brought back by its owner, as it was when deleted."""


# --- node -------------------------------------------------------------------------------------


class GreetingPlaced(_Folded, AggregateCreated):
    """The story's root: the card's chosen greeting, spoken by the character."""

    story_id: UUID
    text: str
    greeting_index: int


class UserSpoke(_Folded, AggregateCreated):
    """The user said something, under a greeting or a reply."""

    story_id: UUID
    parent_id: UUID
    text: str
    depth: int
    turn: int
    said_at: datetime | None = None  # when it was said, if before it was recorded (an imported chat)


class ReplyPosted(_Folded, AggregateCreated):
    """A finished reply arrived from the client's own model (bring-your-own mode), sealed on arrival."""

    story_id: UUID
    parent_id: UUID
    text: str
    depth: int
    turn: int
    said_at: datetime | None = None  # when it was said, if before it was recorded (an imported chat)


class ReplyRevised(_Folded, AggregateEvent):
    """The text of a sealed reply (or greeting) was revised in place; earlier texts stay in history."""

    text: str
    reason: str


class NodeStarred(_Folded, AggregateEvent):
    """The node became an anchor: it is quoted verbatim by summaries and never dropped."""


class NodeUnstarred(_Folded, AggregateEvent):
    """The node stopped being an anchor."""


class NodeHidden(_Folded, AggregateEvent):
    """The node was left out of contexts; it stays in the tree and in search."""


class NodeUnhidden(_Folded, AggregateEvent):
    """The node came back into contexts."""


# --- engine turns: a reply written by the main model through draft tools ------------------------


class ReplyOpened(_Folded, AggregateCreated):
    """changji began writing a reply with the main model: an empty draft at version 0."""

    story_id: UUID
    parent_id: UUID
    depth: int
    turn: int
    model: str


class ClientPartNoted(_Folded, AggregateEvent):
    """This reply answers a front end's request through the chat-completions proxy (or, noted again, a
    request that continued it); the front end's own part of what the upstream got — its system messages
    before the chat, its blocks inside and after it, the words it had the reply start with — is kept as
    the blob `client_part` names (the SHA-256 of a list of the blobs of its texts; `projections/context/
    relayed.py`)."""

    client_part: str


class DraftWritten(_Folded, AggregateEvent):
    """The whole draft was replaced; `version` is the draft's new version."""

    version: int
    text: str
    direct: bool


class DraftAppended(_Folded, AggregateEvent):
    """Text was added to the end of the draft."""

    version: int
    text: str
    separator: str
    direct: bool


class DraftEdited(_Folded, AggregateEvent):
    """A batch of quote→replacement edits was applied, all against the previous version."""

    version: int
    edits: list[dict[str, str]]


class DraftRead(_Folded, AggregateEvent):
    """The model read (part of) the draft at a version."""

    version: int
    start: int | None
    end: int | None


class DraftSearched(_Folded, AggregateEvent):
    """The model searched the draft."""

    version: int
    query: str
    hits: int


class DraftRefused(_Folded, AggregateEvent):
    """A tool call was refused (stale version, bad quote, malformed arguments …); nothing changed."""

    tool: str
    reason: str


class ReplySealed(_Folded, AggregateEvent):
    """The draft was sealed at a version: the turn's reply is final."""

    version: int


class TurnAsked(_Folded, AggregateEvent):
    """The model paused the turn with a decision card (2–4 options) for the user."""

    ask_id: str
    question: str
    options: list[str]


class AskAnswered(_Folded, AggregateEvent):
    """The user answered the decision card; the turn may resume."""

    ask_id: str
    answer: str


class TurnStopped(_Folded, AggregateEvent):
    """The turn ended without a seal (stopped, disconnected, failed, runaway); the draft is kept unsealed."""

    reason: StopReason
    detail: str


class PreviousReplyRead(_Folded, AggregateEvent):
    """The model read the previous sealed reply (`target_id`) at its text version, before revising it."""

    target_id: UUID
    version: int


class MemorySearched(_Folded, AggregateEvent):
    """The model's `memory_search` tool searched the story's memory for `query` and answered with
    `found`, in the order listed (story order): for each passage, `node_id` (the reply of its turn, or
    the last node an episode summary covers), `kind` ("turn" or "episode") and `line`, the text the
    tool's answer gave word for word (what the model was told, whatever the archive holds later)."""

    query: str
    found: list[dict[str, str]]


class ReplyWithdrawn(_Folded, AggregateEvent):
    """This turn revised the previous reply instead of writing a new one; the opened reply is set aside."""

    target_id: UUID
    reason: str


class ModelCalled(_Folded, AggregateEvent):
    """One call to a model on behalf of this node: for the cost ledger."""

    purpose: CallPurpose
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    outcome: str


# --- background work annotating a node ------------------------------------------------------------


class ScenePatched(_Folded, AggregateEvent):
    """A patch to the scene as it stands at this node: the scribe's reading of this reply (`author`
    "scribe"), or an edit by the user ("user"). Character names are stored already matched to known
    spellings; `warnings` lists what the merge rules refused. The snapshot at a node is the fold of
    the patches on its path, in path order, whatever order they were written in."""

    author: SceneAuthor
    patch: dict[str, Any]
    warnings: list[str]


class SideJobFailed(_Folded, AggregateEvent):
    """An attempt at background work of `kind` for this node failed; it is tried again at `retry_at`,
    or never again when `retry_at` is None."""

    kind: JobKind
    attempt: int
    error: str
    retry_at: datetime | None


class SideJobSkipped(_Folded, AggregateEvent):
    """Background work of `kind` for this node was settled without a result, for `reason`."""

    kind: JobKind
    reason: str


# --- compaction: summaries annotate the last node they cover ------------------------------------------


class EpisodeSummarized(_Folded, AggregateEvent):
    """One pack of turns was summarized: the episode covers the path from `start_id` (at `start_depth`;
    its parent is `after_id`, None at the root) down to this node, turns `first_turn`–`last_turn`.
    `anchors` are the starred nodes inside, quoted word for word wherever the episode is replayed.
    `author` is "model" (the side model) or "extractive" (the offline summarizer)."""

    episode_id: str
    start_id: UUID
    after_id: UUID | None
    start_depth: int
    first_turn: int
    last_turn: int
    text: str
    anchors: list[UUID]
    author: SummaryAuthor


class DigestFolded(_Folded, AggregateEvent):
    """The story digest now covers the whole path from the root down to this node: the previous digest
    (on `previous_id`, if any) and the episodes `absorbed` were folded into five `sections`."""

    digest_id: str
    previous_id: UUID | None
    absorbed: list[str]
    last_turn: int
    sections: dict[str, str]
    anchors: list[UUID]
    author: SummaryAuthor


class SummaryEdited(_Folded, AggregateEvent):
    """The user rewrote this node's episode (`text`) or digest (`sections`); later folds use the edit."""

    summary_id: str
    text: str | None
    sections: dict[str, str] | None


class CompactionDue(_Folded, AggregateEvent):
    """With this reply its path holds `uncovered` turns after the last summary, enough for a pack (or
    more than the context window fits, `reason` "budget"): a compaction job for the path is due.
    The turns are counted up to a bound (`domain.rules.compaction.announce_limit`, so that announcing
    costs the same however long the story): a path further behind records the bound plus one."""

    uncovered: int
    reason: CompactionReason


class SideJobDone(_Folded, AggregateEvent):
    """Background work of `kind` for this node finished; `detail` says what it did (where its result is)."""

    kind: JobKind
    detail: str
