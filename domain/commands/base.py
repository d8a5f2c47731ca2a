"""What every command group shares: the application it works on, and the record a command answers with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from domain.errors import VersionConflictError

if TYPE_CHECKING:
    from eventsourcing.domain import Aggregate

    from domain.application import Changji

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Written(Generic[T]):
    """What a command made (`value`) and the notification position of its last event, which the
    service waits for before it answers (read your writes)."""

    value: T
    position: int


class CommandGroup:
    """The commands of one capability, run on `app` (which loads, caches and saves aggregates)."""

    def __init__(self, app: Changji) -> None:
        self.app = app


def expect_version(aggregate: Aggregate, expected_version: int | None) -> None:
    """Refuse a write made against another version than the aggregate's (If-Match)."""
    if expected_version is not None and expected_version != aggregate.version:
        raise VersionConflictError(
            f"expected version {expected_version}, current version is {aggregate.version}", field="If-Match"
        )
