"""The card's and its lorebooks' events: immutable facts in the past tense. Their topics are forever
(`domain/topics.py` keeps every topic they were stored under resolving)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import AggregateCreated, AggregateEvent

from domain.folded import Folded

# --- card -------------------------------------------------------------------------------------


class CardCreated(Folded, AggregateCreated):
    """A tenant created a character card with its memory settings."""

    tenant_id: str
    data: dict[str, Any]
    settings: dict[str, Any]


class CardUpdated(Folded, AggregateEvent):
    """The card's fields or settings were replaced by a new revision."""

    data: dict[str, Any]
    settings: dict[str, Any]


class CardDeleted(Folded, AggregateEvent):
    """The card was deleted; its stories remain readable until deleted themselves."""


class CardMerged(Folded, AggregateEvent):
    """The card was merged into another card of its tenant (`into`): it leaves every listing as a deleted
    card does, its stories are moved there (each by its own `StoryMovedToCard`), its attached lorebooks
    are attached there, and a proxied chat that would make this card again goes to that one."""

    into: UUID


class CardImported(Folded, AggregateCreated):
    """A tenant imported a character card from a file: its fields verbatim, its art and other files kept
    by content hash (`art`, `assets`: {path?, sha256, media_type, size}), and what the file was (`source`:
    container, spec, warnings)."""

    tenant_id: str
    data: dict[str, Any]
    settings: dict[str, Any]
    source: dict[str, Any]
    art: dict[str, Any] | None
    assets: list[dict[str, Any]]


class LorebookAttached(Folded, AggregateEvent):
    """A stand-alone lorebook was attached to the card: its entries take part in the card's stories."""

    lorebook_id: UUID
    name: str


class LorebookDetached(Folded, AggregateEvent):
    """The lorebook was detached from the card; its entries no longer take part."""

    lorebook_id: UUID


# --- lorebook ---------------------------------------------------------------------------------


class LorebookCreated(Folded, AggregateCreated):
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


class LoreEntryAdded(Folded, AggregateEvent):
    """An entry was added: by the user, or by the model at a node of a story (`written_at`: story_id,
    node_id); `pending` when the card's write gate holds it for the user's approval."""

    entry: dict[str, Any]
    written_at: dict[str, Any] | None
    pending: bool


class LoreEntryChanged(Folded, AggregateEvent):
    """An entry was replaced by a new revision (same uid)."""

    entry: dict[str, Any]


class LoreEntryRemoved(Folded, AggregateEvent):
    """An entry was removed from the book."""

    uid: int


class LoreEntryDisabled(Folded, AggregateEvent):
    """An entry was switched off: it stays in the book and activates no more."""

    uid: int


class LoreEntryEnabled(Folded, AggregateEvent):
    """A switched-off entry was switched on again."""

    uid: int


class LoreEntryApproved(Folded, AggregateEvent):
    """The user approved an entry the write gate held: it takes part from now on."""

    uid: int


class LorebookDeleted(Folded, AggregateEvent):
    """The lorebook was deleted (detached from its card first)."""
