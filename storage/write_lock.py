"""One writer at a time across the processes that share an SQLite file: an exclusive `flock` on a lock file
beside it, taken around each command and each commit.

SQLite serializes writers itself, but a writer that finds the file locked sleeps in steps of 1, 2, 5,
10 … ms before it looks again; a process waiting on this lock is woken the moment it is let go. The
lock is reentrant within a process (the domain is only ever run by one thread at a time there, which
takes it once for a command and again for each commit inside it).

The lock file also holds a count, mapped into each process's memory, that whoever lets the lock go
adds one to (`generation`): a process that sees the count where it last looked knows no other wrote
since, without asking the database (`service/log_follower.py`); `own` is the count before and after
this process's last hold, so its own writes need not send it looking either. A second count (`files`)
tells the processes that the read models moved to a rebuilt file (`service/read_side.py`).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
from pathlib import Path
from types import TracebackType

COUNTS = 16  # bytes: the lock's count, then the read models' moves to another file


class WriteLock:
    def __init__(self, path: str | Path | None) -> None:
        """`path`: the lock file (made if missing); None: no other process can write, nothing to lock."""
        self.path = str(path) if path is not None else None
        self._fd: int | None = None
        self._count: mmap.mmap | None = None
        self.own = (-1, -1)  # the count when this process last took the lock, and as it let it go
        self._depth = 0
        self._owner: int | None = None
        self._guard = threading.Lock()  # (a second thread waits here, not on the file)
        self.waits = 0  # times the lock was found held by another process

    def __enter__(self) -> WriteLock:
        self._take(wait=True)
        return self

    def try_enter(self) -> bool:
        """Take the lock only if nobody holds it right now (this thread may, again); whether it did.
        Exit it as `with` would (`__exit__`)."""
        return self._take(wait=False)

    def _take(self, wait: bool) -> bool:
        """Take the lock (again, for the thread that holds it); without `wait`, only if it is free."""
        me = threading.get_ident()
        if self._owner == me:
            self._depth += 1
            return True
        if not self._guard.acquire(blocking=wait):
            return False
        try:
            if not self._acquire(wait):
                self._guard.release()
                return False
        except BaseException:
            self._guard.release()
            raise
        self._owner, self._depth = me, 1
        return True

    def _acquire(self, wait: bool) -> bool:
        """Take the lock across processes (this thread holds the process's guard); whether it did."""
        if self.path is None:
            return True
        self._open()
        assert self._fd is not None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                return False
            self.waits += 1
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # (the GIL is let go while it waits)
        return True

    def _release(self) -> None:
        """Let the lock go across processes, counting the release."""
        if self._fd is not None:
            before = self.generation
            assert self._count is not None
            self._count[:8] = (before + 1).to_bytes(8, "little")
            self.own = (before, before + 1)
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._depth -= 1
        if self._depth:
            return
        try:
            self._release()
        finally:
            self._owner = None
            self._guard.release()

    @property
    def generation(self) -> int:
        """How often a process let the lock go (0 without a file)."""
        return self._read(0)

    @property
    def files(self) -> int:
        """How often the read models moved to another file (a rebuilt one; 0 without a file)."""
        return self._read(8)

    def moved_files(self) -> None:
        """Count a move of the read models to another file (by the holder of the lock)."""
        assert self._owner == threading.get_ident(), "the read models move under the write lock"
        if self._count is not None:
            self._count[8:16] = (self.files + 1).to_bytes(8, "little")

    def _read(self, offset: int) -> int:
        if self.path is None:
            return 0
        self._open()
        assert self._count is not None
        return int.from_bytes(self._count[offset : offset + 8], "little")

    def _open(self) -> None:
        if self._fd is not None:
            return
        assert self.path is not None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < COUNTS:
                os.ftruncate(fd, COUNTS)  # (a new file: the counts start at 0)
            self._count = mmap.mmap(fd, COUNTS)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def close(self) -> None:
        if self._count is not None:
            self._count.close()
            self._count = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
