"""The read side kept up with the event store: catch-ups on a projector thread, the full-text index a
step behind, and a poll for events other processes wrote.

Read your writes: a command returns the notification position of its last event, and `sync(position)`
returns only once the read models have folded at least that far. Concurrent callers share one
catch-up. Listeners (`on_synced`) hear of every catch-up: the job system looks for new work there.

A read-model file rebuilt beside the running service (`changji projections rebuild`) is adopted at the
next poll: on the projector thread, holding the event store's write lock, what was written since it
was made is folded into it; then it is named the file in use (`storage/read_model_files.py`) and the
read models switch to it. Listeners (`on_adopted`) hear of the new path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from projections.read_models.store import ReadModels
from projections.runner import INDEX_BATCH, ProjectionRunner
from storage import read_model_files
from storage.write_lock import WriteLock

log = logging.getLogger(__name__)
# the full-text index catches up this long after a fold, in the background (a search does at once):
# turns in quick succession then share one indexing transaction, and none waits for it
INDEX_DELAY = 1.0
BULK_REPLAY = 20_000  # events in the log from which empty read models are replayed as a rebuild is


class ReadSide:
    def __init__(
        self,
        runner: ProjectionRunner,
        poll_interval: float = 1.0,
        index_delay: float = INDEX_DELAY,
        data_dir: Path | None = None,
        bulk_replay: int = BULK_REPLAY,
        write_lock: WriteLock | None = None,
        held: read_model_files.Held | None = None,
        moves: int | None = None,
    ) -> None:
        """`data_dir`: where rebuilt read-model files are offered (None: none are looked for);
        `bulk_replay`: events in the log from which empty read models are replayed in bulk at the start;
        `write_lock`: the event store's, under which a rebuilt file is switched to and whose file counts
        the switches (None: this process alone serves the data dir); `held`: the file in use, held
        already (`read_model_files.hold_current`); `moves`: the lock's count of moves as it stood before
        the caller read which file is in use (a move after is then followed)."""
        self.runner, self.bulk_replay = runner, bulk_replay
        self.write_lock = write_lock if write_lock is not None else WriteLock(None)
        self._files_seen = moves if moves is not None else self.write_lock.files
        self._switching = threading.RLock()  # (a switch, by whichever thread: one at a time)
        self.poll_interval, self.index_delay, self.data_dir = poll_interval, index_delay, data_dir
        self._adopted: list[Callable[[str, str], None]] = []
        self._projector = ThreadPoolExecutor(1, thread_name_prefix="changji-projector")
        self._catch_up: asyncio.Future[int] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._indexer: asyncio.Task[None] | None = None
        self._index_due, self._index_seen, self._closing = False, 0, False
        self._listeners: list[Callable[[], None]] = []
        self.leading: Callable[[], bool] = lambda: True  # whether this process adopts rebuilt files (the leader)
        self._held = held  # the read-model file in use, held (see `_hold`)

    @property
    def position(self) -> int:
        return self.runner.position

    def on_synced(self, listener: Callable[[], None]) -> None:
        """Call `listener` (on the event loop) after every catch-up."""
        self._listeners.append(listener)

    def on_adopted(self, listener: Callable[[str, str], None]) -> None:
        """Call `listener(old path, new path)` when a rebuilt read-model file was adopted (on the
        projector thread)."""
        self._adopted.append(listener)

    async def adopt_offered(self) -> str | None:
        """Adopt a rebuilt read-model file if one is offered; its path, or None. The files are looked
        at and switched on the projector thread (no file I/O on the loop), between two folds.

        Where several processes serve the data dir, the leader adopts an offer: holding the event
        store's write lock (no write comes in between), it folds into the file what the rebuild did
        not hold, names it the file in use, counts the move in the lock's file and switches. Every
        process looks at that count before each domain call and each read-model query
        (`follow_moves`) and switches too when it moved: no read after a write answered elsewhere is
        read from the old file, and no process reads the new one before it is whole."""
        if self.data_dir is None:
            return None
        adopt = self._adopt if self.leading() else self._follow_current
        adopted = await asyncio.get_running_loop().run_in_executor(self._projector, adopt, self.data_dir)
        if adopted is not None:
            await self.sync()  # what was written after the rebuild
        return adopted

    def follow_moves(self) -> None:
        """Switch to the file in use if the read models moved to another since the last look (on the
        calling thread: the look is a read of mapped memory, the switch a few file operations)."""
        if self.data_dir is None or self.write_lock.files == self._files_seen:
            return
        with self._switching:
            moves = self.write_lock.files
            if moves != self._files_seen:
                self._follow_current(self.data_dir)
                if self.runner.store.path == str(read_model_files.current(self.data_dir)):
                    self._files_seen = moves  # (else the next call tries again)

    def _follow_current(self, data_dir: Path) -> str | None:
        """Switch to the file the data dir names in use, if this process reads another."""
        with self._switching:
            in_use = read_model_files.current(data_dir)
            if str(in_use) == self.runner.store.path or not in_use.exists():
                return None
            return self._switch(in_use, rebuilt=False)  # (named in use: whole by the time it was named)

    def _adopt(self, data_dir: Path) -> str | None:
        """The leader's part: holding the write lock (so nothing is written meanwhile), fold into the
        offered file what the rebuild did not hold — on a connection of its own, so nothing here reads
        the file before it is whole — then name it the file in use, count the move, and switch."""
        offered = read_model_files.waiting(data_dir)
        if offered is None or str(offered) == self.runner.store.path:
            return self._follow_current(data_dir)  # (another process may have led the switch)
        with self.write_lock, self._switching:
            if read_model_files.waiting(data_dir) != offered:  # (adopted, or offered over, meanwhile)
                return self._follow_current(data_dir)
            try:
                position = self._fold_into(offered)
            except ValueError as exc:
                log.error("not adopting the offered read models (the offer is withdrawn): %s", exc)
                read_model_files.withdraw(data_dir, offered)
                return None
            # any other failure (the disk, the event store) leaves the offer for the next poll
            try:
                read_model_files.promote(data_dir, offered)
            except OSError:
                if read_model_files.current(data_dir) != offered:
                    raise  # (not named in use: nothing changed, the offer stays)
                log.warning("the rebuilt read models are in use; tidying up after them failed", exc_info=True)
            self.write_lock.moved_files()
            switched = self._switch(offered, rebuilt=True)
            if switched is not None:  # (else `follow_moves` tries again at the next call)
                self._files_seen = self.write_lock.files
                log.info("read models switched to %s, caught up to %s", offered.name, position)
            return switched

    def _fold_into(self, offered: Path) -> int:
        """Fold into the offered file, on a connection of its own, what was written since it was
        rebuilt; the position it reached. ValueError: not a finished rebuild of this layout."""
        ReadModels.check(offered)
        store = ReadModels(offered)
        try:
            return ProjectionRunner(self.runner.source, store, self.runner.reader).catch_up()
        finally:
            store.writer.conn.close()

    def _switch(self, path: Path, rebuilt: bool) -> str | None:
        """Read and fold `path` from here on (`rebuilt`: it must be a finished rebuild)."""
        data_dir = self.data_dir
        assert data_dir is not None
        old = self.runner.store.path
        try:
            position = self.runner.adopt(str(path), rebuilt)
        except (ValueError, OSError, sqlite3.Error) as exc:
            log.error("could not switch to the read models in use (%s): %s", path.name, exc)
            return None
        self._hold(str(path))
        for listener in self._adopted:  # (the checkpointer lets go of the old file before it is removed)
            listener(old, str(path))
        read_model_files.remove_unused(data_dir)  # (the old file goes once no process holds it)
        log.info("read models switched to %s (at position %s)", path.name, position)
        return str(path)

    async def sync(self, position: int | None = None) -> int:
        """Catch the read models up (to at least `position`). Concurrent callers share one catch-up."""
        while position is None or self.runner.position < position:
            await asyncio.shield(self._fold())
            if position is None:
                break
        if self.runner.position != self._index_seen:  # new texts, perhaps: index them in a while
            self._index_seen = self.runner.position
            self._index_later()
        for listener in self._listeners:
            listener()
        return self.runner.position

    def sync_soon(self, position: int) -> None:
        """Start catching the read models up to `position` without waiting (a turn calls it once its
        model request is on its way); a later `sync()` shares the catch-up in flight."""
        if self.runner.position < position:
            self._fold()

    def fold_now(self, position: int) -> int:
        """Catch the read models up to `position` on the calling thread, right after a short write (the
        last save of a turn, an append), so its answer needs no hop to the projector thread. If the
        projector is folding just then, this does not wait for it (the caller may be the event loop):
        the caller's `sync()` then shares that catch-up."""
        return self.runner.catch_up(position, wait=False)

    def fold_up_to(self, position: int, after: int = 0, events: Sequence[tuple[int, Any]] = ()) -> int:
        """Catch the read models up to `position` on the calling thread (a thread that may wait: the
        projector's fold in flight is waited for), from `events` — every event of the log after `after`
        up to their last, read by someone else — where they reach, from the log past them."""
        if self.runner.position >= position:
            return self.runner.position
        if events:
            self.runner.fold_read(after, events)
        return self.runner.catch_up(position) if self.runner.position < position else self.runner.position

    async def fresh(self) -> int:
        """Fold what the log holds now: its head is read first, since a catch-up already under way may
        have read the log before a write another process answered."""
        head = await asyncio.to_thread(self.runner.max_position)
        return await self.sync(head)

    async def searchable(self) -> None:
        """Bring the full-text index up to date with the read models (so with every write that
        returned): a search calls it first. A batch per hop to the projector thread, so folds (and
        the writes waiting on them) go on in between."""
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(self._projector, self.runner.index_search, INDEX_BATCH) == INDEX_BATCH:
            pass

    def _fold(self) -> asyncio.Future[int]:
        """The catch-up in flight on the projector thread, or a new one."""
        if self._catch_up is None or self._catch_up.done():
            self._catch_up = asyncio.get_running_loop().run_in_executor(self._projector, self.runner.catch_up)
            self._catch_up.add_done_callback(self._caught_up)
        return self._catch_up

    def _caught_up(self, future: asyncio.Future[int]) -> None:
        if self._catch_up is future:
            self._catch_up = None
        if not future.cancelled():
            future.exception()  # retrieved here: a catch-up nobody waited for fails quietly; the next retries

    def _index_later(self) -> None:
        self._index_due = True
        if self._closing:
            return
        if self._indexer is None or self._indexer.done():
            self._indexer = asyncio.ensure_future(self._index_in_background())

    async def _index_in_background(self) -> None:
        """Index the texts folded since the last time, `index_delay` after a fold, a batch per hop to the
        projector thread (folds go on in between); again if more were folded meanwhile."""
        while self._index_due:
            await asyncio.sleep(self.index_delay)
            self._index_due = False
            try:
                await self.searchable()
            except Exception:
                log.exception("full-text indexing failed; it is tried again after the next fold or search")

    # --- lifecycle ----------------------------------------------------------------------------

    def _hold(self, path: str) -> None:
        """Hold the read-model file in use (`read_model_files.Held`), letting go of the one before."""
        if self.data_dir is None or (self._held is not None and self._held.path == path):
            return
        held, self._held = self._held, read_model_files.Held(path)
        if held is not None:
            held.let_go()

    async def start(self) -> None:
        """Fold everything already in the log, then poll for events written by other processes (and
        for rebuilt read models offered meanwhile). Read models that hold nothing yet (a new file, or a
        layout changed by an upgrade) while the log holds much are replayed as a rebuild is, in bulk."""
        self._hold(self.runner.store.path)
        await self.adopt_offered()
        await asyncio.get_running_loop().run_in_executor(
            self._projector, replay_if_empty, self.runner, self.bulk_replay
        )
        await self.sync()
        self._poller = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                self.follow_moves()
                await self.adopt_offered()
                await self.sync()
            except Exception:
                log.exception("read-model catch-up failed; retrying at the next poll")

    async def stop(self) -> None:
        self._closing = True  # no background indexing starts from here on
        for task in (self._poller, self._indexer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._projector.shutdown(wait=True)
        if self._held is not None:
            self._held.let_go()
            self._held = None


def replay_if_empty(runner: ProjectionRunner, bulk_replay: int = BULK_REPLAY) -> None:
    """Replay the log into read models that hold nothing yet, in bulk as a rebuild does, when the log
    holds `bulk_replay` events or more (fewer are simply caught up)."""
    if runner.store.position() != 0 or runner.max_position() < bulk_replay:
        return
    total, done, said = runner.max_position(), [0], [time.monotonic()]
    log.info("read models empty: replaying %s events in bulk before serving", f"{total:,}")

    def progress(step: int) -> None:
        done[0] += step
        if time.monotonic() - said[0] >= 5:
            said[0] = time.monotonic()
            log.info("replayed %s of %s events", f"{done[0]:,}", f"{total:,}")

    position = runner.rebuild(progress=progress)
    log.info("read models replayed up to %s", f"{position:,}")
