"""Paths through a story tree, walked lazily from a node up to the root."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from uuid import UUID

from domain.values import NodeView

LoadNode = Callable[[UUID], NodeView]


def walk_up(load: LoadNode, node_id: UUID) -> Iterator[NodeView]:
    """The node, its parent, … the root: each step loads one node, so callers pay only for what they read."""
    current: UUID | None = node_id
    while current is not None:
        node = load(current)
        yield node
        current = node.parent_id


def project_path(load: LoadNode, leaf_id: UUID, limit: int | None = None) -> list[NodeView]:
    """Root→leaf (or only the last `limit` nodes of it, still in root→leaf order)."""
    nodes = list(islice(walk_up(load, leaf_id), limit))
    nodes.reverse()
    return nodes
