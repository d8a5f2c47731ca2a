"""What every command shares: the aggregates it loads and saves (a Protocol: commands take it, and the
rooms never import the application that provides it), and the record a command answers with."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.errors import NotFoundError, VersionConflictError

T = TypeVar("T")
A = TypeVar("A", bound=Aggregate)
P = TypeVar("P", bound="Aggregates")


class Aggregates(Protocol):
    """Loads and saves aggregates (`domain/application.py`'s `Changji` is the one there is)."""

    def get(self, cls: type[A], aggregate_id: UUID, missing: type[NotFoundError]) -> A:
        """The aggregate of that class, or `missing` (also when the id belongs to another class)."""
        ...

    def evicting(self, *aggregates: Aggregate | None) -> AbstractContextManager[None]:
        """Evict the aggregates from the cache if the command fails after changing them."""
        ...

    def commit(self, *aggregates: Aggregate) -> int:
        """Save in one transaction; the last notification id (for read-your-writes)."""
        ...

    def commit_changed(self, *aggregates: Aggregate) -> int:
        """Commit the aggregates that have pending events (0 when none has)."""
        ...


@dataclass(frozen=True, slots=True)
class Written(Generic[T]):
    """What a command made (`value`) and the notification position of its last event, which the
    service waits for before it answers (read your writes)."""

    value: T
    position: int


class CommandGroup(Generic[P]):
    """The commands of one capability, run on `app` (which loads, caches and saves aggregates)."""

    def __init__(self, app: P) -> None:
        self.app = app


def expect_version(aggregate: Aggregate, expected_version: int | None) -> None:
    """Refuse a write made against another version than the aggregate's (If-Match)."""
    if expected_version is not None and expected_version != aggregate.version:
        raise VersionConflictError(
            f"expected version {expected_version}, current version is {aggregate.version}", field="If-Match"
        )
