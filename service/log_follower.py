"""Other processes' writes, followed: this process's cached aggregates kept in step with the event store.

Several processes may write one event store (the workers of `changji serve --workers N`). Each keeps
aggregates and node views in memory, so before it runs a command or a read of the domain it reads the
events saved since it last looked and folds them into what it holds (`Changji.follow`): what it reads
next is what the store holds, so a write answered by another process is seen here (read your
writes), and a command decides on the current state. The look costs a read of mapped memory most of
the time: the write lock's file counts the releases of the lock, and only when another process let it
go since the last look is the log asked (and at least once a second, for a writer that would not
take the lock).

A command runs holding the store's write lock from its look to its save (`Changji.write_lock`, which
every commit of every process takes), so no other process saves in between: it decides on the state
it saves over, and never loses a race (which would cost it its aggregates: a command that fails
evicts what it touched, and a story read back whole reads up to a snapshot's worth of events). Reads
do not take the lock. Should a command still lose a race (a writer that does not take the lock), it
runs again, as long as it has saved nothing (one that saved once and then lost a race gives its error
to the caller, as a conflict).

Listeners (`on`) hear of events of a kind that another process saved: a story deleted there has its
recall index dropped here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from domain.application import Changji, stored_class
from domain.errors import ConcurrentWriteError
from storage.notifications import StoredEvents, StoredRow, uuid_of
from storage.write_lock import WriteLock

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
ATTEMPTS = 4  # runs of a command that keeps losing races (to writers that do not take the lock)
BATCH = 1000  # rows read per query
ASK_SECONDS = 1.0  # the log is asked at least this often, whatever the write lock's count says


class LogFollower:
    def __init__(self, app: Changji, reader: StoredEvents | None, written: WriteLock | None = None) -> None:
        """`reader`: the event store's log (None: an in-memory store, which no other process writes);
        `written`: the store's write lock, whose count tells whether anyone wrote since the last look
        (None: the log is asked every time)."""
        self.app, self.reader = app, reader
        self.written = written if written is not None and written.path is not None else None  # (a count to read)
        self.position = int(app.recorder.max_notification_id() or 0) if reader is not None else 0
        self._seen = self.written.generation if self.written is not None else -1  # the lock's count at the last look
        self._asked = time.monotonic()  # when the log was last asked
        self._listeners: dict[type | None, list[Callable[[Any], None]]] = {}
        self.raced = 0  # commands that lost a race all the same (to a writer without the lock) and ran again
        # called after each look with the position, and the events it read after which position (so that
        # the read models take them without reading the log again)
        self.then: Callable[[int, int, list[tuple[int, Any]]], object] | None = None

    def on(self, event_class: type, listener: Callable[[Any], None]) -> None:
        """Call `listener(event)` for each event of that class another process saved (on the thread
        that follows: the domain's)."""
        self._listeners.setdefault(event_class, []).append(listener)

    def follow(self, ask: bool = False) -> int:
        """Fold what was saved since the last look; the position followed up to. The log is not asked
        while the write lock's count says nobody else wrote since (this process's own writes aside: the
        position moves past them unread), but at least every `ASK_SECONDS` (for a writer that does not
        take the lock), and always when `ask`."""
        if self.reader is None:
            return self.position
        after = self.position
        read: list[StoredRow] | None = [] if self.then is not None else None
        position = self._look(ask, read)
        if self.then is not None:
            assert self.reader is not None and read is not None
            self.then(position, after, [(row[0], self.reader.event(row)) for row in read])
        return position

    def _look(self, ask: bool, read: list[StoredRow] | None = None) -> int:
        """`follow` without the listener; the rows read are added to `read`."""
        reader = self.reader
        assert reader is not None
        count = -1
        if self.written is not None:
            count = self.written.generation
            before, after = self.written.own
            if self._seen == before and count == after:  # only this process wrote since the last look
                last = self.app.last_saved
                if last <= self.position or self.app.recent(self.position, last) is not None:
                    self.position, self._seen = max(self.position, last), count
            if not ask and count == self._seen and time.monotonic() - self._asked < ASK_SECONDS:
                return self.position
        asked = time.monotonic()
        while True:
            rows = reader.rows(self.position + 1, BATCH)
            for row in rows:
                self._row(row)
                self.position = row[0]
            if read is not None:
                read.extend(rows)
            if len(rows) < BATCH:
                break
        self._seen, self._asked = count, asked  # (only once the look went through)
        return self.position

    def _row(self, row: StoredRow) -> None:
        reader = self.reader
        assert reader is not None
        decoded: list[Any] = []

        def event() -> Any:
            if not decoded:
                decoded.append(reader.event(row))
            return decoded[0]

        self.app.follow(row[0], uuid_of(row[1]), row[2], row[3], event)
        listeners = self._listeners.get(stored_class(row[3])) if self._listeners else None  # (old topics too)
        if listeners and not self.app.saved_here(row[0]):
            for listener in listeners:
                try:
                    listener(event())
                except Exception:
                    log.exception("a listener of %s failed", row[3])

    def read(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a read of the domain on what the store holds now. The caller holds the domain's lock
        (one thread at a time)."""
        self.follow()
        return fn(*args, **kwargs)

    def command(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a command of the domain on what the store holds now, holding the write lock; again
        where it lost a race before it saved anything. The caller holds the domain's lock."""
        for attempt in range(1, ATTEMPTS + 1):
            with self.app.write_lock:
                self.follow(ask=attempt > 1)
                commits = self.app.commits
                try:
                    return fn(*args, **kwargs)
                except ConcurrentWriteError:
                    if self.reader is None or self.app.commits != commits or attempt == ATTEMPTS:
                        raise
                    self.raced += 1
        raise AssertionError("unreachable")
