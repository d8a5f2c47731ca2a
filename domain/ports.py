"""What the domain needs from outside, as Protocols; adapters live in providers/ and projections/."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID


class TokenCounter(Protocol):
    """Counts tokens of a text the way the target model would (or a close estimate)."""

    name: str

    def count(self, text: str) -> int: ...


class TreeIndex(Protocol):
    """Ancestry questions over a story's tree, answered by the `nodes` read model."""

    def is_ancestor(self, ancestor_id: UUID, node_id: UUID) -> bool:
        """True when `ancestor_id` is `node_id` or one of its ancestors."""
        ...
