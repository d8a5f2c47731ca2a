"""Which of the processes serving one data dir leads: it alone runs what must run once (the job system,
the WAL checkpoints, adopting a rebuilt read-model file). The leader is whoever holds an exclusive
`flock` on `leader.lock` in the data dir; the kernel lets go of it when that process ends, however it
ends, so another can take over. A process without a data dir (an in-memory store: nobody else can
share it) always leads.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK = "leader.lock"


class LeaderLock:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = data_dir / LOCK if data_dir is not None else None
        self._handle: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self.path is None or self._handle is not None

    def try_take(self) -> bool:
        """Take the lead if nobody holds it; whether this process leads now."""
        if self.held:
            return True
        assert self.path is not None
        handle = self.path.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")  # (for a reader's curiosity: the lock is what counts)
        handle.flush()
        self._handle = handle
        return True

    def still_held(self) -> bool:
        """Whether this process still leads (a lock held by the kernel stays held while the process lives)."""
        return self.held

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
