"""Domain work off the event loop.

Threads: every event-store call (commands and aggregate loads) runs on one writer thread, so cached
aggregates are never touched by two threads; read-model queries use a small reader pool with one
connection per thread. Nothing blocking runs on the loop, with one measured exception (`command`).

Read your writes: `write` runs a command and answers only once the read side shows its events (a
command returns the notification position of its last event, alone or as `.position`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, Protocol, TypeVar

from service.log_follower import LogFollower
from service.read_side import ReadSide

P = ParamSpec("P")
T = TypeVar("T")


class Positioned(Protocol):
    """A command's answer that carries the notification position of its last event."""

    @property
    def position(self) -> int: ...


W = TypeVar("W", bound=int | Positioned)


class Executor:
    def __init__(
        self, read_side: ReadSide, inline_commands: bool = True, readers: int = 2, follower: LogFollower | None = None
    ) -> None:
        """`inline_commands`: `command` may run on the event loop when the writer thread is idle — set
        where commits do not wait for the disk (see `command`). `follower`: what other processes saved
        is followed before each domain call, and a command that lost a race to one runs again
        (`service/log_follower.py`)."""
        self.read_side = read_side
        self.inline_commands = inline_commands
        self.follower = follower
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="changji-writer")
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="changji-reader")
        self._writing = threading.Lock()  # held by whichever thread runs a domain command
        self._queued = 0  # commands handed to the writer thread and not yet finished

    async def write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W:
        """Run a domain command; answer only once the read models show its events."""
        result = await self._on_writer(fn, *args, **kwargs)
        await self.read_side.sync(result if isinstance(result, int) else result.position)
        return result

    async def command(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a domain command without waiting for the read models: the turn engine's (open a turn,
        record a round), which read back only from the event store and sync before they answer.

        When no other command is running or queued, it runs right here on the event loop instead of
        on the writer thread: a hop to a thread and back costs 0.2–0.35 ms on small virtual machines
        (the sleeping core has to be woken twice), about as much as the command itself, and a turn
        makes one per round. These commands are short (a transaction of a few events, and at the
        opening the context, which is incremental); commands of any other kind keep to the thread."""
        if self.inline_commands and self._queued == 0 and self._writing.acquire(blocking=False):
            try:
                return self._run(fn, *args, **kwargs)
            finally:
                self._writing.release()
        return await self._on_writer(fn, *args, **kwargs)

    async def load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a domain query (aggregate loads) on the writer thread."""
        return await self._on_writer(fn, *args, **kwargs)

    async def query(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a read-model query on a reader thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, functools.partial(fn, *args, **kwargs))

    async def _on_writer(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """On the writer thread, holding `_writing` (which a command run on the loop holds too): the
        domain objects are only ever touched by one thread at a time."""

        def locked() -> T:
            with self._writing:
                return self._run(fn, *args, **kwargs)

        self._queued += 1  # only ever changed on the event loop
        try:
            return await asyncio.get_running_loop().run_in_executor(self._writer, locked)
        finally:
            self._queued -= 1

    def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A domain call, holding `_writing`: after what other processes saved, where they may."""
        if self.follower is None:
            return fn(*args, **kwargs)
        return self.follower.run(fn, *args, **kwargs)

    async def stop(self) -> None:
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
