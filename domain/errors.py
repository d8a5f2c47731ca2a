"""Domain errors: small named classes under one base, translated to HTTP at the edge."""

from __future__ import annotations

from domain.language import Language


class DomainError(Exception):
    """Base of every rule the domain refuses to break. Its message is English (an API error's detail);
    a refusal the main model is shown (a tool call's) carries the same in Chinese too (`zh`), so a
    Chinese story's model is told why in Chinese (`told`)."""

    field: str | None = None

    def __init__(self, message: str, *, field: str | None = None, zh: str | None = None) -> None:
        super().__init__(message)
        self.zh = zh
        if field is not None:
            self.field = field

    def told(self, language: Language) -> str:
        """The message in `language` (English where no Chinese was given)."""
        return self.zh if language == "zh" and self.zh else str(self)


class NotFoundError(DomainError):
    """Something asked for does not exist (or belongs to another tenant)."""


class CardInvalidError(DomainError):
    """The card's fields or settings would not be valid after the change."""


class CardNotFoundError(NotFoundError):
    """No such card for this tenant."""


class CardMergeError(DomainError):
    """A card cannot be merged as asked (into itself, or it was merged into another card already)."""


class LorebookNotFoundError(NotFoundError):
    """No such lorebook attached to this card."""


class LoreEntryNotFoundError(NotFoundError):
    """No such entry in this lorebook."""


class LoreEntryInvalidError(DomainError):
    """A lorebook entry's fields are not valid."""


class StoryNotFoundError(NotFoundError):
    """No such story for this tenant."""


class NodeNotFoundError(NotFoundError):
    """No such node in this story."""


class JobNotFoundError(NotFoundError):
    """No job of that kind was ever due for that node."""


class SavePointNotFoundError(NotFoundError):
    """No such save point or world line in this story."""


class VersionConflictError(DomainError):
    """The caller's expected version is stale, or another writer got there first."""


class ConcurrentWriteError(VersionConflictError):
    """Another writer saved an aggregate this command had loaded, between the load and the save (the
    command decided on what it read before: nothing was saved, and running it again decides anew)."""


class InvalidParentError(DomainError):
    """The node kind cannot be attached under that parent (turns alternate user/reply)."""

    field = "parent_id"


class GreetingIndexError(DomainError):
    """The card has no greeting with that index."""

    field = "greeting_index"


class NodeKindError(DomainError):
    """The operation does not apply to this kind of node."""


class EmptyTextError(DomainError):
    """A node or revision must carry text."""

    field = "text"


class DraftError(DomainError):
    """A draft operation the engine refuses; the model is told why and may try again."""


class DraftVersionConflictError(DraftError):
    """The operation carried a version other than the draft's current one."""

    field = "version"


class DraftEditError(DraftError):
    """An edit batch could not be applied (a quote missing, repeated or overlapping)."""

    field = "edits"


class DraftSealedError(DraftError):
    """The draft is sealed (or the turn is over): no more writes."""


class TurnStateError(DomainError):
    """The turn is not in a state that allows this (answering when nothing was asked, …)."""


class ScenePatchError(DomainError):
    """A user's edit of the scene of which nothing applies (every part refused by the merge rules)."""

    field = "patch"


class SummaryError(DomainError):
    """A summary edit that does not fit the node (no episode or digest there, or neither given)."""


class NothingToCompactError(DomainError):
    """A manual compaction found too little uncovered text to pack."""
