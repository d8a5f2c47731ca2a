"""The base of every domain event: it hands itself to its aggregate's one fold method (`when`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eventsourcing.domain import Aggregate


class Folded:
    """Hands every event to its aggregate's single fold method (`when`)."""

    def apply(self, aggregate: Aggregate) -> None:
        aggregate.when(self)  # type: ignore[attr-defined]
