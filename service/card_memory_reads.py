"""What a context reads of its card's memory: the resident summary (one read-model row away) and recall
over the memory's passages, whose index is built once per version of the memory and kept for the cards
read most recently."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from uuid import UUID

from domain.application import Changji
from domain.card.card import Card
from domain.values import StorySettings
from projections.context.resident import Resident
from projections.read_models.store import ReadModels
from projections.recall.card_memory_index import CardMemoryIndex, MemoryHit, memory_passages

MEMORY_INDEXES = 256  # cards whose memory's recall index is kept built


class CardMemoryReads:
    def __init__(self, app: Changji, store: ReadModels) -> None:
        self.app, self.store = app, store
        self._indexes: dict[UUID, tuple[int, CardMemoryIndex]] = {}  # card → (memory version, index)
        self._lock = threading.Lock()  # (contexts are assembled on several threads)

    def of(
        self, card: Card, settings: StorySettings
    ) -> tuple[Resident | None, Callable[[str], Sequence[MemoryHit]] | None]:
        """The card memory's resident summary and its recall, when the story carries them (its `card_memory`
        setting) and the card has a memory. The recall's index is built once per version of the memory."""
        found = self.store.resident_of(card.id) if settings.card_memory else None
        if found is None:
            return None, None
        text, version = found
        resident = Resident(text, version) if text.strip() else None
        with self._lock:
            cached = self._indexes.get(card.id)
        if cached is None or cached[0] != version:
            memory = self.app.memory.of(card.id)
            if memory is None:
                return resident, None
            recaps = {story: recap.text for story, recap in memory.remembered.items()}
            cached = (version, CardMemoryIndex(memory_passages(memory.handbook, recaps)))
            with self._lock:
                self._indexes[card.id] = cached
                while len(self._indexes) > MEMORY_INDEXES:
                    del self._indexes[next(iter(self._indexes))]
        index, k = cached[1], settings.recall_k
        return resident, (lambda words: index.search(words, 3 * k)) if k > 0 else None
