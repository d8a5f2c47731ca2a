"""The card memory's commands: a story's recap recorded, a merge recorded, a story forgotten or remembered,
and a user's edits (each against the version it read). The memory of a card begins with its first recap."""

from __future__ import annotations

from uuid import UUID

from domain.aggregates import CommandGroup, Written, expect_version
from domain.card.commands.base import CardAggregates
from domain.errors import NotFoundError
from domain.memory.card_memory import CardMemory, Usage, memory_id
from domain.memory.events import ForgetReason, MemoryAuthor
from domain.memory.handbook import Handbook


class CardMemoryNotFoundError(NotFoundError):
    """The card has no memory yet (none of its stories was recapped)."""


class CardMemoryCommands(CommandGroup[CardAggregates]):
    def of(self, card_id: UUID) -> CardMemory | None:
        """The card's memory, if it began (no ownership check: background work)."""
        try:
            return self.app.get(CardMemory, memory_id(card_id), CardMemoryNotFoundError)
        except CardMemoryNotFoundError:
            return None

    def read(self, tenant_id: str, card_id: UUID) -> CardMemory:
        """The memory of one of the tenant's cards (CardMemoryNotFoundError when it has none yet)."""
        card = self.app.card(tenant_id, card_id)
        memory = self.of(card.id)
        if memory is None:
            raise CardMemoryNotFoundError(f"card {card_id} has no memory yet: none of its stories was recapped")
        return memory

    def record_recap(
        self, tenant_id: str, card_id: UUID, story_id: UUID, text: str, fingerprint: str,
        span: tuple[UUID | None, UUID | None], turns: int, omitted_chars: int, author: MemoryAuthor, usage: Usage,
    ) -> Written[bool]:  # fmt: skip
        """A story's recap (False: one for this fingerprint is there already, or the user's stands)."""
        memory = self.of(card_id) or CardMemory.begin(card_id, tenant_id)
        with self.app.evicting(memory):
            written = memory.write_recap(story_id, text, fingerprint, span, turns, omitted_chars, author, usage)
            return Written(written, self.app.commit_changed(memory))

    def record_merge(
        self, card_id: UUID, handbook: Handbook, resident: str, author: MemoryAuthor, usage: Usage,
        expected_version: int | None = None,
    ) -> Written[bool]:  # fmt: skip
        """A merge of the recaps, made against the memory at `expected_version` (a merge made while a recap
        or an edit came in is refused, and made again)."""
        memory = self._of(card_id)
        expect_version(memory, expected_version)
        with self.app.evicting(memory):
            merged = memory.merge(handbook, resident, author, usage)
            return Written(merged, self.app.commit_changed(memory))

    def forget_story(self, card_id: UUID, story_id: UUID, reason: ForgetReason) -> int:
        memory = self.of(card_id)
        if memory is None:
            return 0
        with self.app.evicting(memory):
            memory.forget(story_id, reason)
            return self.app.commit_changed(memory)

    def remember_story(self, card_id: UUID, story_id: UUID) -> int:
        memory = self.of(card_id)
        if memory is None:
            return 0
        with self.app.evicting(memory):
            memory.remember(story_id)
            return self.app.commit_changed(memory)

    def edit_recap(
        self, tenant_id: str, card_id: UUID, story_id: UUID, text: str, expected_version: int | None
    ) -> Written[CardMemory]:
        memory = self.read(tenant_id, card_id)
        expect_version(memory, expected_version)
        with self.app.evicting(memory):
            memory.edit_recap(story_id, text)
            return Written(memory, self.app.commit_changed(memory))

    def edit_handbook(
        self, tenant_id: str, card_id: UUID, handbook: Handbook, expected_version: int | None
    ) -> Written[CardMemory]:
        memory = self.read(tenant_id, card_id)
        expect_version(memory, expected_version)
        with self.app.evicting(memory):
            memory.edit_handbook(handbook)
            return Written(memory, self.app.commit_changed(memory))

    def edit_resident(
        self, tenant_id: str, card_id: UUID, text: str, expected_version: int | None
    ) -> Written[CardMemory]:
        memory = self.read(tenant_id, card_id)
        expect_version(memory, expected_version)
        with self.app.evicting(memory):
            memory.edit_resident(text)
            return Written(memory, self.app.commit_changed(memory))

    def _of(self, card_id: UUID) -> CardMemory:
        memory = self.of(card_id)
        if memory is None:
            raise CardMemoryNotFoundError(f"card {card_id} has no memory yet")
        return memory
