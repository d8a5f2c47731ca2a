"""What a turn is made of: the events it streams, its handle, and the ports it runs on (where domain
calls run, how the read models follow, how a context, the memory and the lore are read)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar
from uuid import UUID

from domain.tree.draft_tools import LoreFound
from domain.values import NodeView, Recollection, StopReason
from projections.context.records import Context
from service.executor import W

P = ParamSpec("P")
T = TypeVar("T")
DONE = "done"


@dataclass(frozen=True, slots=True)
class TurnEvent:
    kind: str  # turn | delta | tool | ask | sealed | revised | stopped | error | done
    data: dict[str, Any]


class Runs(Protocol):
    """Where the loop's domain calls run (the service's `Executor`)."""

    async def write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W: ...
    async def command(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...
    async def load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...
    async def short_load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...


class Folds(Protocol):
    """How the loop keeps the read models up with what it saved (the service's `ReadSide`)."""

    async def sync(self, position: int | None = None) -> int: ...
    def sync_soon(self, position: int) -> None: ...
    def fold_now(self, position: int) -> int: ...


ContextAt = Callable[[str, UUID, UUID | None], Context]
"""(tenant, story, node) → the context for the next turn there (the service's `StoryViews.context`)."""
MemorySearch = Callable[[str, UUID, UUID, str, int], Awaitable[list[Recollection]]]
"""(tenant, story, the reply being written, query, k) → passages of the story's memory on its path
(the service's `service.memory.MemorySearch`)."""
LoreSearch = Callable[[str, UUID, UUID, str, int], list[LoreFound]]
"""(tenant, story, the reply being written, query, limit) → the card's lore entries for the query, as the
path to that reply sees them (the service's `StoryViews.lore_at`; it runs where commands run)."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A turn opened in one command: the empty reply, the notification position of the
    opening's last event, and the context at the user's node (None if assembling it failed: the turn
    then assembles it again and records the failure as its error)."""

    reply: NodeView
    position: int
    context: Context | None


@dataclass
class TurnHandle:
    reply_id: UUID
    events: asyncio.Queue[TurnEvent]
    tenant_id: str = ""
    story_id: UUID | None = None
    task: asyncio.Task[NodeView] = field(init=False)
    stop_reason: StopReason = "stopped"
    finished: bool = False  # DONE was emitted
    late_stop: asyncio.Future[Any] | None = None  # the stop recorded for a turn cancelled before it ran
    calling_since: float | None = None  # perf_counter() while a model call is in flight
    shown: str = ""  # the draft as the stream has shown it (as recorded when the turn began, then its deltas)
