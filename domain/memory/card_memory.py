"""The CardMemory aggregate: one per card (its id derived from the card's), holding each story's recap,
the handbook and resident summary the last merge made, the user's edits, and the stories forgotten.

What it decides: a recap is written once per fingerprint of what it read, and never over a user's edit;
a merge is due when a recap changed since the last merge or a forgotten story is still in the handbook;
a merge is refused when it loses a story it was given, keeps a forgotten one, or drops an item a user
wrote while a story behind it is remembered; a user-edited resident summary is kept as written."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from domain.errors import DomainError, EmptyTextError, NotFoundError
from domain.memory.events import (
    CardMemoryBegun,
    ForgetReason,
    HandbookEdited,
    MemoryAuthor,
    MemoryMerged,
    RecapEdited,
    RecapWritten,
    ResidentEdited,
    StoryForgotten,
    StoryRemembered,
)
from domain.memory.handbook import Handbook, Item, MemoryTextError, check_merge, handbook_data, handbook_of

CARD_MEMORIES = uuid5(NAMESPACE_URL, "https://changji.dev/card-memory")


def memory_id(card_id: UUID) -> UUID:
    """The id of a card's memory (one per card)."""
    return uuid5(CARD_MEMORIES, str(card_id))


class MemoryStateError(DomainError):
    """The card's memory cannot take this change as it stands (a forgotten story's recap, say)."""


class RecapNotFoundError(NotFoundError):
    """The card's memory holds no recap of that story."""


@dataclass(frozen=True, slots=True)
class Recap:
    story_id: UUID
    version: int
    text: str
    fingerprint: str
    first_node_id: UUID | None
    last_node_id: UUID | None
    turns: int
    omitted_chars: int
    author: MemoryAuthor | None  # None: the user wrote it
    written_at: datetime


@dataclass(frozen=True, slots=True)
class Usage:
    """A side-model call's cost (zeros for the offline rules)."""

    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


class CardMemory(Aggregate):
    def __init__(self) -> None:
        self.tenant_id = ""
        self.card_id: UUID | None = None
        self.recaps: dict[UUID, Recap] = {}
        self.forgotten: set[UUID] = set()
        self.asked: set[UUID] = set()  # forgotten because the user asked (a story deleted is remembered at its restore)
        self.handbook = Handbook()
        self.resident = ""
        self.merged: dict[UUID, int] = {}  # the recap version of each story the last merge read
        self.protected: set[str] = set()  # ids of the items a user added to the handbook or changed in it
        self.resident_edited = False
        self.merged_by: MemoryAuthor | None = None  # who wrote the last merge
        self.merged_at: datetime | None = None

    @classmethod
    def begin(cls, card_id: UUID, tenant_id: str) -> CardMemory:
        return cls._create(CardMemoryBegun, id=memory_id(card_id), tenant_id=tenant_id, card_id=card_id)

    # --- recaps -----------------------------------------------------------------------------------

    def recapped(self, story_id: UUID, fingerprint: str) -> bool:
        """Whether the story's recap already read what `fingerprint` names (or a user's stands instead)."""
        recap = self.recaps.get(story_id)
        return recap is not None and (recap.fingerprint == fingerprint or recap.author is None)

    def write_recap(
        self, story_id: UUID, text: str, fingerprint: str, span: tuple[UUID | None, UUID | None], turns: int,
        omitted_chars: int, author: MemoryAuthor, usage: Usage,
    ) -> bool:  # fmt: skip
        """Record a recap; False (nothing recorded) when one for this fingerprint is there already, or the
        user's own recap stands."""
        if story_id in self.forgotten:
            raise MemoryStateError(f"story {story_id} is forgotten: its recap is not written")
        if not text.strip():
            raise EmptyTextError("a recap needs text")
        if self.recapped(story_id, fingerprint):
            return False
        self.trigger_event(
            RecapWritten, story_id=story_id, version=self._next(story_id), text=text, fingerprint=fingerprint,
            first_node_id=span[0], last_node_id=span[1], turns=turns, omitted_chars=omitted_chars, author=author,
            model=usage.model, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
        )  # fmt: skip
        return True

    def edit_recap(self, story_id: UUID, text: str) -> None:
        if story_id not in self.recaps:
            raise RecapNotFoundError(f"no recap of story {story_id}", field="story_id")
        if story_id in self.forgotten:
            raise MemoryStateError(f"story {story_id} is forgotten: remember it before editing its recap")
        if not text.strip():
            raise EmptyTextError("a recap needs text")
        if text != self.recaps[story_id].text:
            self.trigger_event(RecapEdited, story_id=story_id, version=self._next(story_id), text=text)

    def _next(self, story_id: UUID) -> int:
        recap = self.recaps.get(story_id)
        return recap.version + 1 if recap is not None else 1

    # --- merging ----------------------------------------------------------------------------------

    @property
    def remembered(self) -> dict[UUID, Recap]:
        return {s: r for s, r in self.recaps.items() if s not in self.forgotten}

    @property
    def changed(self) -> dict[UUID, Recap]:
        """The recaps the last merge did not read (new ones, or newer versions)."""
        return {s: r for s, r in self.remembered.items() if self.merged.get(s) != r.version}

    @property
    def to_forget(self) -> set[UUID]:
        """Forgotten stories the handbook still holds."""
        return self.forgotten & (self.handbook.stories | set(self.merged))

    @property
    def merge_due(self) -> bool:
        return bool(self.changed or self.to_forget)

    @property
    def users_items(self) -> tuple[Item, ...]:
        """The handbook's items a user wrote (added or changed by an edit), which every merge keeps."""
        return tuple(item for item in self.handbook.items if item.item_id in self.protected)

    def merge(self, handbook: Handbook, resident: str, author: MemoryAuthor, usage: Usage) -> bool:
        """Record a merge; False (nothing recorded) when nothing was due and it changes nothing. Refused,
        with nothing recorded, when it loses what it was given."""
        if not self.merge_due and handbook == self.handbook and (self.resident_edited or resident == self.resident):
            return False
        check_merge(set(self.remembered) | (self.handbook.stories - self.forgotten), self.forgotten, handbook)
        kept = {item.item_id for item in handbook.items}
        lost = [
            item.text for item in self.handbook.items
            if item.item_id in self.protected and item.item_id not in kept and set(item.sources) - self.forgotten
        ]  # fmt: skip
        if lost:
            raise MemoryTextError(f"the merge dropped items the user wrote: {'; '.join(lost)[:200]}")
        self.trigger_event(
            MemoryMerged, handbook=handbook_data(handbook), resident=self.resident if self.resident_edited else resident,
            recaps={str(s): r.version for s, r in self.remembered.items()}, forgotten=sorted(self.to_forget, key=str),
            author=author, model=usage.model, prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )  # fmt: skip
        return True

    def edit_handbook(self, handbook: Handbook) -> None:
        unknown = handbook.stories - set(self.recaps)
        if unknown:
            raise MemoryTextError(f"the handbook names stories with no recap: {', '.join(map(str, unknown))}")
        gone = handbook.stories & self.forgotten
        if gone:
            raise MemoryTextError(f"the handbook names forgotten stories: {', '.join(map(str, gone))}")
        if handbook != self.handbook:
            self.trigger_event(HandbookEdited, handbook=handbook_data(handbook))

    def edit_resident(self, text: str) -> None:
        if text != self.resident or not self.resident_edited:
            self.trigger_event(ResidentEdited, text=text)

    # --- forgetting -------------------------------------------------------------------------------

    def forget(self, story_id: UUID, reason: ForgetReason) -> None:
        """Forget a story (again, when the user asks to forget one forgotten for its deletion: so that its
        restore does not bring it back)."""
        if story_id not in self.forgotten or (reason == "asked" and story_id not in self.asked):
            self.trigger_event(StoryForgotten, story_id=story_id, reason=reason)

    def remember(self, story_id: UUID) -> None:
        if story_id in self.forgotten:
            self.trigger_event(StoryRemembered, story_id=story_id)

    # --- the fold ---------------------------------------------------------------------------------

    def when(self, event: Any) -> None:
        match event:
            case CardMemoryBegun():
                self.tenant_id, self.card_id = event.tenant_id, event.card_id
            case RecapWritten():
                self.recaps[event.story_id] = Recap(
                    event.story_id, event.version, event.text, event.fingerprint, event.first_node_id,
                    event.last_node_id, event.turns, event.omitted_chars, event.author, event.timestamp,
                )  # fmt: skip
            case RecapEdited():
                old = self.recaps[event.story_id]
                self.recaps[event.story_id] = Recap(
                    old.story_id, event.version, event.text, old.fingerprint, old.first_node_id, old.last_node_id,
                    old.turns, old.omitted_chars, None, event.timestamp,
                )  # fmt: skip
            case MemoryMerged():
                self.handbook, self.resident = handbook_of(event.handbook), event.resident
                self.merged = {UUID(story): version for story, version in event.recaps.items()}
                self.merged_by, self.merged_at = event.author, event.timestamp
            case HandbookEdited():
                before = {item.item_id for item in self.handbook.items}
                self.handbook = handbook_of(event.handbook)
                after = {item.item_id for item in self.handbook.items}
                self.protected = (self.protected & after) | (after - before)  # (what the user added or changed)
            case ResidentEdited():
                self.resident, self.resident_edited = event.text, True
            case StoryForgotten():
                self.forgotten.add(event.story_id)
                if event.reason == "asked":
                    self.asked.add(event.story_id)
            case StoryRemembered():
                self.forgotten.discard(event.story_id)
                self.asked.discard(event.story_id)
