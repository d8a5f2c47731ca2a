"""Domain work, on the event loop or off it.

Threads: aggregates are only ever touched by one thread at a time (`_writing`): the writer thread, or
the event loop itself for short calls when the writer thread is idle and commits do not wait for the
disk (`inline_commands`): a hop to a thread and back costs 0.2–0.35 ms on small virtual machines (the
sleeping core has to be woken twice) and the GIL handed back and forth, as much as a short call itself.
Long calls (imports, replays, compactions) keep to the writer thread, so the loop is never held long.
Read-model queries use a small reader pool with one connection per thread.

Other processes (the other workers of `changji serve --workers N`): what they saved is followed before
each domain call, and a command holds the event store's write lock from that look to its save
(`service/log_follower.py`).

Read your writes: `write` and `short_write` run a command and answer only once the read models show
its events (a command returns the notification position of its last event, alone or as `.position`).
The command's events are folded right after it, still holding the write lock, so the read models keep
in step with the log (no other process's events come in between: nothing is read back, and no two
processes fold at once); a fold another thread has under way at that moment is waited for by `sync`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, ParamSpec, Protocol, TypeVar

from service.log_follower import LogFollower
from service.read_side import ReadSide
from storage.write_lock import WriteLock

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
Kind = Literal["read", "command", "write"]  # a write is a command whose events are folded right after it
LOCK_LOOK = 0.0005  # a call that found another process's write lock held looks again this soon
RELEASE_WAIT = 0.005  # a call waiting for the writer thread to let the domain go looks again after this at most


class Positioned(Protocol):
    """A command's answer that carries the notification position of its last event."""

    @property
    def position(self) -> int: ...


W = TypeVar("W", bound=int | Positioned)


def position_of(result: int | Positioned) -> int:
    return result if isinstance(result, int) else result.position


class Executor:
    def __init__(
        self,
        read_side: ReadSide,
        inline_commands: bool = True,
        readers: int = 2,
        follower: LogFollower | None = None,
        write_lock: WriteLock | None = None,
        fresh_reads: bool = False,
    ) -> None:
        """`inline_commands`: short calls may run on the event loop when the writer thread is idle — set
        where commits do not wait for the disk. `follower`: what other processes saved is followed
        before each domain call (`service/log_follower.py`); `write_lock`: the event store's, which every
        command holds (None: one of this process alone). `fresh_reads`: the read models are this
        process's own while other processes write the store (a shared database), so each read-model
        query first folds what the log holds beyond them: a write another process answered is read
        here by the next request."""
        self.read_side = read_side
        self.fresh_reads = fresh_reads
        if fresh_reads and follower is not None:  # (a domain call may read the read models too: the scene, summaries)
            follower.then = self._fold_followed
        self.inline_commands = inline_commands
        self.follower = follower
        self.write_lock = write_lock if write_lock is not None else WriteLock(None)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="changji-writer")
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="changji-reader")
        self._writing = threading.Lock()  # held by whichever thread runs a domain call
        self._writer_waits = False  # the writer thread waits for `_writing`
        # set (from the writer thread, on the loop it belongs to) as it lets the domain go
        self._released: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._waiting = 0  # calls on the loop waiting for the writer thread to let the domain go

    @property
    def waiting(self) -> int:
        """Calls on the event loop waiting for the writer thread to let the domain go."""
        return self._waiting

    async def write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W:
        """Run a domain command on the writer thread; answer only once the read models show its events."""
        result = await self._on_writer("write", fn, *args, **kwargs)
        await self.read_side.sync(position_of(result))
        return result

    async def short_write(self, fn: Callable[P, W], *args: P.args, **kwargs: P.kwargs) -> W:
        """`write` for a short command (an append: a transaction of a few events), here on the loop
        when the writer thread is idle."""
        result = await self._here_or_on_writer("write", fn, *args, **kwargs)
        await self.read_side.sync(position_of(result))
        return result

    async def command(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a short domain command without waiting for the read models, here on the loop when the
        writer thread is idle: the turn engine's (open a turn, record a round), which read back only
        from the event store and sync before they answer."""
        return await self._here_or_on_writer("command", fn, *args, **kwargs)

    async def load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a domain query (aggregate loads) on the writer thread."""
        return await self._on_writer("read", fn, *args, **kwargs)

    async def short_load(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`load` for a short query (a node, the context for the next turn: incremental, a few ms), here
        on the loop when the writer thread is idle."""
        return await self._here_or_on_writer("read", fn, *args, **kwargs)

    async def query(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a read-model query on a reader thread."""
        if self.fresh_reads:
            await self.read_side.fresh()
        self.read_side.follow_moves()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, functools.partial(fn, *args, **kwargs))

    async def short_query(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`query` for a short one (a node's children, by an index: tens of µs), here on the loop, with
        the loop's own connection: less than the hop to a reader thread and back."""
        if self.fresh_reads:
            await self.read_side.fresh()
        self.read_side.follow_moves()
        return fn(*args, **kwargs)

    async def _here_or_on_writer(self, kind: Kind, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Here on the loop, when no other thread runs a domain call (or waits to) — and, for a command,
        when no other process holds the write lock just then. The loop never blocks: a call that finds
        either held (a long call on the writer thread, another process's command) looks again when the
        writer thread lets the domain go (it wakes the calls waiting), or within a millisecond for
        another process's lock, other requests going on meanwhile. No lock is ever held while waiting
        for another, so a hold lasts as long as the call itself."""
        if not self.inline_commands:
            return await self._on_writer(kind, fn, *args, **kwargs)
        loop = asyncio.get_running_loop()
        if self._released is None or self._released[0] is not loop:
            self._released = (loop, asyncio.Event())
        released = self._released[1]
        self._waiting += 1  # (counted before the first look: a release after it wakes this call)
        try:
            while True:
                released.clear()  # (a release from here on wakes this call)
                if not self._writer_waits and self._writing.acquire(blocking=False):
                    try:
                        if kind == "read":
                            return self._run(kind, fn, *args, **kwargs)
                        if self.write_lock.try_enter():
                            try:
                                return self._run(kind, fn, *args, **kwargs)
                            finally:
                                self.write_lock.__exit__(None, None, None)
                    finally:
                        self._writing.release()
                    await asyncio.sleep(LOCK_LOOK)  # another process holds the write lock: look again soon
                    continue
                try:  # the writer thread holds the domain (or waits for it): woken as it lets go
                    async with asyncio.timeout(RELEASE_WAIT):
                        await released.wait()
                except TimeoutError:
                    pass  # (a wake another waiter cleared first: looked again all the same)
        finally:
            self._waiting -= 1

    async def _on_writer(self, kind: Kind, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """On the writer thread, holding `_writing` (which a call run on the loop holds too): the domain
        objects are only ever touched by one thread at a time. While it waits for `_writing`, the loop
        starts no call of its own (a long call would starve); a command then looks for the write lock as
        the loop does, letting `_writing` go while another process holds it."""

        loop = asyncio.get_running_loop()
        # where no call runs on the loop, a command waits for the write lock before the domain, not
        # holding it: nothing else here takes the lock, and a wait needs no looking again
        first = kind != "read" and not self.inline_commands

        def locked() -> T:
            if not first:
                return held()
            with self.write_lock:
                result = held()
            if kind == "write" and self.fresh_reads:  # (this process's own read models: once the lock is let go)
                self._fold(position_of(result))  # type: ignore[arg-type]  # (writes answer with a position)
            return result

        def held() -> T:
            while True:
                self._writer_waits = True
                try:
                    self._writing.acquire()
                finally:
                    self._writer_waits = False
                if kind == "read" or first or self.write_lock.try_enter():
                    break
                self._writing.release()
                time.sleep(LOCK_LOOK)
            try:
                return self._run(kind, fn, *args, **kwargs)
            finally:
                if kind != "read" and not first:
                    self.write_lock.__exit__(None, None, None)
                self._writing.release()
                released = self._released
                if self._waiting and released is not None and released[0] is loop:
                    with contextlib.suppress(RuntimeError):  # (the loop closed meanwhile: nobody to wake)
                        loop.call_soon_threadsafe(released[1].set)

        return await loop.run_in_executor(self._writer, locked)

    def _run(self, kind: Kind, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A domain call, holding `_writing`: after what other processes saved, where they may (a command
        holding the write lock from that look to its save, and a write to its fold)."""
        follower = self.follower
        if kind == "read":
            self.read_side.follow_moves()  # (the read models moved to a rebuilt file: this process too)
            return follower.read(fn, *args, **kwargs) if follower is not None else fn(*args, **kwargs)
        with self.write_lock:
            self.read_side.follow_moves()  # (under the lock, under which they move: the fold goes to the new file)
            result = follower.command(fn, *args, **kwargs) if follower is not None else fn(*args, **kwargs)
            if kind == "write" and not self.fresh_reads:  # (read models other processes fold too: in step with the log)
                self._fold(position_of(result))  # type: ignore[arg-type]  # (writes answer with a position)
        return result  # (this process's own read models, `fresh_reads`: folded once the lock is let go, `locked`)

    def _fold_followed(self, position: int, after: int, events: list[tuple[int, Any]]) -> None:
        """The read models brought up to what the follower read, from the events it read (after `after`):
        the log is not read twice. A failure is the projector's to report: the domain call goes on, and
        its reads of the read models may lag."""
        try:
            self.read_side.fold_up_to(position, after, events)
        except Exception:
            log.warning("folding what another process saved failed; the projector tries again", exc_info=True)

    def _fold(self, position: int) -> None:
        """Fold a write's events into the read models now, on this thread."""
        if self.read_side.position < position:
            try:
                self.read_side.fold_now(position)
            except Exception:  # (the write is saved: `sync` folds it, or fails the answer, as ever)
                log.warning("the fold after a write failed; it is tried again off the loop", exc_info=True)

    async def stop(self) -> None:
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
