"""The Lorebook aggregate: a card's stand-alone book (an imported World Info file) or its supplement (what
the model recorded with `lorebook_write`). Every change of an entry is an event; the card's own embedded
`character_book` is part of the card's fields, not of this aggregate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.card.events import (
    LorebookCreated,
    LorebookDeleted,
    LoreEntryAdded,
    LoreEntryApproved,
    LoreEntryChanged,
    LoreEntryDisabled,
    LoreEntryEnabled,
    LoreEntryRemoved,
)
from domain.card.lore import LoreBookKind, LoreEntry, LoreScan
from domain.errors import LoreEntryNotFoundError

SUPPLEMENT_UID_BASE = 9000  # the model's entries are numbered apart from the user's


@dataclass(frozen=True, slots=True)
class WrittenAt:
    """Where the model wrote an entry: the story and the node of the reply that wrote it."""

    story_id: UUID
    node_id: UUID


class Lorebook(Aggregate):
    def __init__(self) -> None:
        self.tenant_id = ""
        self.card_id: UUID | None = None
        self.kind: LoreBookKind = "world_info"
        self.name = ""
        self.format = ""
        self.scan = LoreScan()
        self.extras: dict[str, Any] = {}
        self.entries: dict[int, LoreEntry] = {}
        self.written_at: dict[int, WrittenAt] = {}
        self.pending: set[int] = set()
        self.highest_uid = -1  # of every entry it ever had: a removed entry's uid is not given again
        self.deleted = False

    @classmethod
    def create(
        cls,
        lorebook_id: UUID,
        tenant_id: str,
        card_id: UUID,
        kind: LoreBookKind,
        name: str,
        format: str,
        scan: LoreScan,
        entries: Sequence[LoreEntry],
        extras: Mapping[str, Any],
    ) -> Lorebook:
        return cls._create(
            LorebookCreated,
            id=lorebook_id,
            tenant_id=tenant_id,
            card_id=card_id,
            kind=kind,
            name=name,
            format=format,
            scan=scan.model_dump(),
            entries=[entry.model_dump(mode="json") for entry in entries],
            extras=dict(extras),
        )

    def next_uid(self) -> int:
        base = SUPPLEMENT_UID_BASE if self.kind == "supplement" else 0
        return max(base - 1, self.highest_uid) + 1

    def holds_content(self, content: str) -> bool:
        wanted = content.strip()
        return any(entry.content.strip() == wanted for entry in self.entries.values())

    def add_entry(self, entry: LoreEntry, written_at: WrittenAt | None = None, pending: bool = False) -> None:
        where = {"story_id": str(written_at.story_id), "node_id": str(written_at.node_id)} if written_at else None
        self.trigger_event(LoreEntryAdded, entry=entry.model_dump(mode="json"), written_at=where, pending=pending)

    def change_entry(self, entry: LoreEntry) -> None:
        if self.entry(entry.uid) != entry:
            self.trigger_event(LoreEntryChanged, entry=entry.model_dump(mode="json"))

    def remove_entry(self, uid: int) -> None:
        self.entry(uid)
        self.trigger_event(LoreEntryRemoved, uid=uid)

    def disable_entry(self, uid: int) -> None:
        if self.entry(uid).enabled:
            self.trigger_event(LoreEntryDisabled, uid=uid)

    def enable_entry(self, uid: int) -> None:
        if not self.entry(uid).enabled:
            self.trigger_event(LoreEntryEnabled, uid=uid)

    def approve_entry(self, uid: int) -> None:
        self.entry(uid)
        if uid in self.pending:
            self.trigger_event(LoreEntryApproved, uid=uid)

    def delete(self) -> None:
        if not self.deleted:
            self.trigger_event(LorebookDeleted)

    def entry(self, uid: int) -> LoreEntry:
        entry = self.entries.get(uid)
        if entry is None:
            raise LoreEntryNotFoundError(f"lorebook {self.id} has no entry {uid}")
        return entry

    def when(self, event: Any) -> None:
        match event:
            case LorebookCreated():
                self.tenant_id, self.card_id, self.kind = event.tenant_id, event.card_id, event.kind  # type: ignore[assignment]
                self.name, self.format, self.extras = event.name, event.format, event.extras
                self.scan = LoreScan.model_validate(event.scan)
                self.entries = {e.uid: e for e in map(LoreEntry.model_validate, event.entries)}
                self.highest_uid = max(self.entries, default=-1)
            case LoreEntryAdded():
                entry = LoreEntry.model_validate(event.entry)
                self.entries[entry.uid] = entry
                self.highest_uid = max(self.highest_uid, entry.uid)
                if event.written_at:
                    where = event.written_at
                    self.written_at[entry.uid] = WrittenAt(UUID(where["story_id"]), UUID(where["node_id"]))
                if event.pending:
                    self.pending.add(entry.uid)
            case LoreEntryChanged():
                entry = LoreEntry.model_validate(event.entry)
                self.entries[entry.uid] = entry
            case LoreEntryRemoved():
                self.entries.pop(event.uid, None)
                self.written_at.pop(event.uid, None)
                self.pending.discard(event.uid)
            case LoreEntryDisabled():
                self.entries[event.uid] = self.entries[event.uid].model_copy(update={"enabled": False})
            case LoreEntryEnabled():
                self.entries[event.uid] = self.entries[event.uid].model_copy(update={"enabled": True})
            case LoreEntryApproved():
                self.pending.discard(event.uid)
            case LorebookDeleted():
                self.deleted = True
