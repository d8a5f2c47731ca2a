"""Lorebooks of a card: attach an imported World Info book, detach it, change its entries one by one;
the model's own entries in the card's supplement (deduplicated by content, held for approval when the
card's write gate says so)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid5

from pydantic import ValidationError

from domain.aggregates import CommandGroup, Written
from domain.card.card import Card
from domain.card.commands.base import CardAggregates
from domain.card.lore import LoreBookKind, LoreEntry, LoreScan
from domain.card.lorebook import Lorebook, WrittenAt
from domain.errors import LorebookNotFoundError, LoreEntryInvalidError

SUPPLEMENT_NAME = "supplement"
_ASKED_TO_RECORD = re.compile(
    r"(?:记下来|记下这|记下她|记下他|记下它|帮我记一下|帮我记下|请记录下来|记录下来|记住这个设定|把.{1,30}?记下|"
    r"(?:记|写|加|收|存|录)(?:进|入|到)(?:设定|世界书)|加到设定|收录进)"
    r"|(?<![A-Za-z])(?:(?:note|jot|write) (?:this|that|it|her|him|them) down|note down|"
    r"(?:add|record|put|save) (?:this|that|it|her|him|them) (?:in|into|to) (?:the |your )?(?:lore|lorebook|world ?info)"
    r"|make a (?:lore|lorebook) entry)(?![A-Za-z])",
    re.IGNORECASE,
)


def asks_to_record(words: str) -> bool:
    """Whether the user's words ask for something to be recorded (the write gate then lets it through): an
    imperative to note something down or into the lore, not any mention of remembering ("Remember that night?",
    "我记住你了" and "通话记录" do not)."""
    return _ASKED_TO_RECORD.search(words) is not None


def supplement_id(card_id: UUID) -> UUID:
    """The one supplement a card has: its id follows from the card's, so two writers make the same one."""
    return uuid5(card_id, "lorebook-supplement")


def lore_entry(fields: Mapping[str, Any], field: str = "entry") -> LoreEntry:
    try:
        return LoreEntry.model_validate(dict(fields))
    except ValidationError as invalid:
        first = invalid.errors()[0]
        raise LoreEntryInvalidError(first["msg"], field=".".join([field, *map(str, first["loc"])])) from None


@dataclass(frozen=True, slots=True)
class LoreWritten:
    """What a `lorebook_write` did: the entry (new, or the one already holding that content), whether it
    was new, and whether the write gate holds it."""

    entry: LoreEntry
    new: bool
    pending: bool


class LoreCommands(CommandGroup[CardAggregates]):
    def attach_lorebook(
        self,
        tenant_id: str,
        card_id: UUID,
        lorebook_id: UUID,
        name: str,
        format: str,
        scan: LoreScan,
        entries: Sequence[LoreEntry],
        extras: Mapping[str, Any],
        kind: LoreBookKind = "world_info",
    ) -> Written[Lorebook]:
        card = self.app.card(tenant_id, card_id)
        book = Lorebook.create(lorebook_id, tenant_id, card_id, kind, name, format, scan, entries, extras)
        with self.app.evicting(card):
            card.attach_lorebook(lorebook_id, name)
            return Written(book, self.app.commit(card, book))

    def detach_lorebook(self, tenant_id: str, card_id: UUID, lorebook_id: UUID) -> int:
        card, book = self.app.card(tenant_id, card_id), self.lorebook(tenant_id, card_id, lorebook_id)
        if book.kind == "supplement":
            raise LoreEntryInvalidError(
                "the card's supplement (the model's own entries) stays attached: remove or disable its entries",
                field="lorebook_id",
            )
        with self.app.evicting(card, book):
            card.detach_lorebook(lorebook_id)
            book.delete()
            return self.app.commit(card, book)

    def lorebook(self, tenant_id: str, card_id: UUID, lorebook_id: UUID) -> Lorebook:
        card = self.app.card(tenant_id, card_id)
        if lorebook_id not in card.lorebooks:
            raise LorebookNotFoundError(f"card {card_id} has no lorebook {lorebook_id}", field="lorebook_id")
        return self.app.get(Lorebook, lorebook_id, LorebookNotFoundError)

    def lorebooks(self, card: Card) -> list[Lorebook]:
        """The books attached to a card, in the order they were attached (the card's own first)."""
        return [self.app.get(Lorebook, book_id, LorebookNotFoundError) for book_id in card.lorebooks]

    def add_lore_entry(
        self, tenant_id: str, card_id: UUID, lorebook_id: UUID, fields: Mapping[str, Any]
    ) -> Written[LoreEntry]:
        book = self.lorebook(tenant_id, card_id, lorebook_id)
        entry = lore_entry({**fields, "uid": fields.get("uid", book.next_uid())})
        if entry.uid in book.entries:
            raise LoreEntryInvalidError(f"lorebook {lorebook_id} already has an entry {entry.uid}", field="entry.uid")
        with self.app.evicting(book):
            book.add_entry(entry)
            return Written(entry, self.app.commit(book))

    def change_lore_entry(
        self, tenant_id: str, card_id: UUID, lorebook_id: UUID, uid: int, changes: Mapping[str, Any]
    ) -> Written[Lorebook]:
        """Merge field changes into the entry as it is now, in one save; `enabled` switches it off or on
        (its own event)."""
        book = self.lorebook(tenant_id, card_id, lorebook_id)
        fields, enabled = dict(changes), changes.get("enabled")
        fields.pop("enabled", None)
        current = book.entry(uid)
        entry = lore_entry({**current.model_dump(), **fields, "uid": uid, "enabled": current.enabled})
        with self.app.evicting(book):
            book.change_entry(entry)
            if enabled is not None:
                book.enable_entry(uid) if enabled else book.disable_entry(uid)
            return Written(book, self.app.commit_changed(book))

    def remove_lore_entry(self, tenant_id: str, card_id: UUID, lorebook_id: UUID, uid: int) -> int:
        book = self.lorebook(tenant_id, card_id, lorebook_id)
        with self.app.evicting(book):
            book.remove_entry(uid)
            return self.app.commit(book)

    def approve_lore_entry(self, tenant_id: str, card_id: UUID, lorebook_id: UUID, uid: int) -> Written[Lorebook]:
        book = self.lorebook(tenant_id, card_id, lorebook_id)
        with self.app.evicting(book):
            book.approve_entry(uid)
            return Written(book, self.app.commit_changed(book))

    def write_lore(
        self,
        card: Card,
        written_at: WrittenAt,
        fields: Mapping[str, Any],
        gated: bool,
        holds: Callable[[WrittenAt | None, WrittenAt], bool],
        unsaved: Lorebook | None = None,
    ) -> tuple[Lorebook | None, LoreWritten]:
        """The model's `lorebook_write`, into the card's supplement (made at its first write; `unsaved`: the
        one an earlier call of the same round made). An entry whose content the supplement already holds,
        in force where the writing reply is (`holds(where an entry was written, where this one is)`: the
        tree's rule, `domain/tree/commands/turns.py`), is not written again (one an abandoned branch wrote is: the
        reply's own then follows its path). Returns the supplement to save with the reply (None when
        nothing changed); the card, when the supplement was made, has changed too."""
        book_id = supplement_id(card.id)
        if unsaved is not None and unsaved.id == book_id:
            book = unsaved
        elif book_id in card.lorebooks:
            book = self.app.get(Lorebook, book_id, LorebookNotFoundError)
        else:
            book = Lorebook.create(
                book_id, card.tenant_id, card.id, "supplement", SUPPLEMENT_NAME, "changji", LoreScan(), [], {}
            )
            card.attach_lorebook(book_id, SUPPLEMENT_NAME)
        entry = lore_entry({**fields, "uid": book.next_uid()}, "arguments")
        same = next(
            (
                e
                for e in book.entries.values()
                if e.content.strip() == entry.content.strip() and holds(book.written_at.get(e.uid), written_at)
            ),
            None,
        )
        if same is not None:
            return None, LoreWritten(same, False, same.uid in book.pending)
        book.add_entry(entry, written_at, pending=gated)
        return book, LoreWritten(entry, True, gated)
