"""WAL checkpoints off the write path.

SQLite's automatic checkpoint runs inside the commit that crosses `wal_autocheckpoint` pages (1,000 by
default): that commit copies the log back into the database file and syncs it, 8–10 ms on these
machines, and the request that made it waits. `changji serve` turns the automatic checkpoint off on
the connections that write (the event store's and the read models') and checkpoints here instead, on
its own thread and connections, whenever a log has grown past the same 1,000 pages, so the files are
checkpointed as often as before and durability is unchanged (see `storage/event_store.py`).

PASSIVE checkpoints never wait for readers or writers: frames still needed by a reader stay in the log
for the next round. Processes that do not run a `Checkpointer` (the CLI) keep the automatic one.

A log's size is its measure: the writing connections set `journal_size_limit` to `LOG_LIMIT_BYTES`, so a
log that starts over after a checkpoint is cut back to that size, and it only grows past the
threshold again once that many new frames were written. A log unchanged since its last checkpoint
is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

PAGES = 1000  # SQLite's own default for wal_autocheckpoint
LOG_LIMIT_BYTES = 1 << 20  # what a reused log is cut back to (a quarter of the threshold at 4 KiB pages)
CHECKPOINT_SECONDS = 1.0  # how often the logs are looked at, once started


class Checkpointer:
    """Checkpoints the write-ahead logs of some SQLite files when they grow past `pages` pages (which
    should be well above what LOG_LIMIT_BYTES holds, or a reused log looks full at once)."""

    def __init__(self, paths: Sequence[str], pages: int = PAGES) -> None:
        self.paths = list(paths)
        self.pages = pages
        self._connections: dict[str, sqlite3.Connection] = {}
        self._checkpointed: dict[str, tuple[int, int]] = {}  # path → (size, mtime) of its log when last done
        self._lock = threading.Lock()  # one round at a time, whichever thread asks
        self.checkpoints = 0  # completed checkpoint calls, for tests and diagnostics
        self._pool: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None

    def run(self) -> int:
        """Checkpoint every log past its threshold; return how many were checkpointed."""
        done = 0
        with self._lock:
            for path in self.paths:
                if self._log_pages(path) >= self.pages:
                    self._checkpoint(path)
                    done += 1
        return done

    def _log_pages(self, path: str) -> int:
        try:
            stat = os.stat(f"{path}-wal")
        except OSError:  # no log yet (or a memory database): nothing to do
            return 0
        if self._checkpointed.get(path) == (stat.st_size, stat.st_mtime_ns):
            return 0  # not written since it was checkpointed
        return (stat.st_size - 32) // (self._page_size(path) + 24)  # a 32-byte header, then frames

    def _page_size(self, path: str) -> int:
        return int(self._connection(path).execute("PRAGMA page_size").fetchone()[0])

    def _checkpoint(self, path: str) -> None:
        busy, frames, copied = self._connection(path).execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        self.checkpoints += 1
        with contextlib.suppress(OSError):
            stat = os.stat(f"{path}-wal")
            self._checkpointed[path] = (stat.st_size, stat.st_mtime_ns)
        if busy or copied < frames:
            log.debug("checkpoint of %s copied %s of %s frames (readers still need the rest)", path, copied, frames)

    def _connection(self, path: str) -> sqlite3.Connection:
        conn = self._connections.get(path)
        if conn is None:
            conn = self._connections[path] = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=5000")
        return conn

    def replace(self, old: str, new: str) -> None:
        """Checkpoint `new` from now on instead of `old` (read models switched to a rebuilt file)."""
        with self._lock:
            self.paths = [new if path == old else path for path in self.paths]
            conn = self._connections.pop(old, None)
            if conn is not None:
                conn.close()

    def close(self) -> None:
        with self._lock:
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()

    # --- as a resource of the running service ---------------------------------------------------

    async def start(self, seconds: float = CHECKPOINT_SECONDS) -> None:
        """Look at the logs every `seconds`, on a thread of their own."""
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="changji-checkpoint")
        self._task = asyncio.create_task(self._every(seconds))

    async def _every(self, seconds: float) -> None:
        assert self._pool is not None
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(seconds)
            try:
                await loop.run_in_executor(self._pool, self.run)
            except Exception:
                log.exception("checkpoint failed; trying again in %s s", seconds)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.close()
