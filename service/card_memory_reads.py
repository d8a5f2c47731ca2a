"""What a context reads of its card's memory: the resident summary (one read-model row away) and recall
over the memory's passages, whose index is built once per version of the memory and kept for the cards
read most recently."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
        self._indexes: dict[UUID, _Built] = {}  # card → its memory's index, by version (least recently read first)
        self._lock = threading.Lock()  # (contexts are assembled on several threads)

    def of(
        self, card: Card, settings: StorySettings, story_id: UUID | None = None
    ) -> tuple[Resident | None, Callable[[str], Sequence[MemoryHit]] | None]:
        """The card memory's resident summary and its recall, when the story carries them (its `card_memory`
        setting) and the card has a memory. What only `story_id` (the story the context is of) left is not
        given back to it as another story's: no resident summary while the memory holds that story alone,
        no recalled passage that only it supports. The recall's index is built once per version of the
        memory, and kept for the cards read most recently."""
        found = self.store.resident_of(card.id) if settings.card_memory else None
        if found is None:
            return None, None
        text, version = found
        with self._lock:
            cached = self._indexes.pop(card.id, None)
            if cached is not None:
                self._indexes[card.id] = cached  # (the most recently read last)
        if cached is None or cached.version != version:
            memory = self.app.memory.of(card.id)
            if memory is None:
                return None, None
            recaps = {story: recap.text for story, recap in memory.remembered.items()}
            passages = memory_passages(memory.handbook, recaps, memory.forgotten)
            cached = _Built(
                version, CardMemoryIndex(passages), frozenset(recaps) | (memory.handbook.stories - memory.forgotten)
            )
            with self._lock:
                self._indexes[card.id] = cached
                while len(self._indexes) > MEMORY_INDEXES:
                    del self._indexes[next(iter(self._indexes))]
        own = story_id is not None and cached.stories <= {story_id}
        resident = Resident(text, version) if text.strip() and not own else None
        index, k = cached.index, settings.recall_k
        if k <= 0 or own:
            return resident, None

        def recall(words: str) -> list[MemoryHit]:
            hits = index.search(words, 3 * k + 1)  # (passages are lines, shorter than a turn: more of them)
            return [hit for hit in hits if set(hit.passage.sources) - {story_id}][: 3 * k]

        return resident, recall


@dataclass(frozen=True, slots=True)
class _Built:
    version: int
    index: CardMemoryIndex
    stories: frozenset[UUID]  # the stories the memory remembers
