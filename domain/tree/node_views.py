"""The views of nodes a process holds: immutable copies of each node's state, kept by id and refreshed by
every save of the node, so walking a path is one dictionary lookup per node once the nodes are warm."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any
from uuid import UUID

from domain.errors import NodeNotFoundError
from domain.tree.node import Node
from domain.values import NodeView

PRELOAD_BATCH = 500  # nodes per read of `preload` (as bound parameters: under SQLite's old limit of 999)
BulkEvents = Callable[[Sequence[UUID]], Sequence[Any]]  # the events of many aggregates in one read


class NodeViews:
    def __init__(self, load: Callable[[UUID], Node], size: int) -> None:
        """`load`: a node's aggregate (NodeNotFoundError when there is none); `size`: how many views are
        kept (the oldest goes first)."""
        self._load, self.size = load, size
        self._views: dict[UUID, NodeView] = {}

    def get(self, node_id: UUID) -> NodeView:
        view = self._views.get(node_id)
        return view if view is not None else self.remember(self._load(node_id).view)

    def held(self, node_id: UUID) -> NodeView | None:
        """The node's view if this process holds it (no read of the store)."""
        return self._views.get(node_id)

    def remember(self, view: NodeView) -> NodeView:
        if len(self._views) >= self.size:
            del self._views[next(iter(self._views))]
        self._views[view.id] = view
        return view

    def forget(self, node_id: UUID) -> None:
        self._views.pop(node_id, None)

    def preload(self, node_ids: Sequence[UUID], bulk_events: BulkEvents | None) -> int:
        """Read the views of those nodes this process does not hold yet, PRELOAD_BATCH nodes per read of
        the store (`bulk_events`) instead of one each; how many it read. A walk over a long path nobody
        read since the start (a compaction's plan on a story imported, or played with compaction off)
        then costs a few queries: read one by one, each load let the GIL go and waited for it again,
        and 20k nodes held the domain for 5 s on a quiet machine and over 20 s beside a loaded event
        loop. Without `bulk_events` (a store in memory) the nodes are loaded one by one."""
        missing = [node_id for node_id in dict.fromkeys(node_ids) if node_id not in self._views]
        if bulk_events is None:
            for node_id in missing:
                with suppress(NodeNotFoundError):
                    self.get(node_id)
            return len(missing)
        read = 0
        for start in range(0, len(missing), PRELOAD_BATCH):
            folded: dict[UUID, Any] = {}
            for event in bulk_events(missing[start : start + PRELOAD_BATCH]):
                folded[event.originator_id] = event.mutate(folded.get(event.originator_id))
            for aggregate in folded.values():
                if isinstance(aggregate, Node) and aggregate.id not in self._views:
                    self.remember(aggregate.view)
                    read += 1
        return read
