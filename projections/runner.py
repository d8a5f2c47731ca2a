"""Catch-up runner: follows the event store's notification log into the read models.

SQLite has no push subscription, so the runner polls from its tracked position. It never skips: an
event that fails to fold stops the runner with the position logged (fix, then rebuild).
`catch_up` runs one call at a time (a lock), whichever thread calls it: the service's projector
thread, or its writer thread right after the last save of a turn (which spares the turn a hop).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from projections.read_models.search_index import IndexerBeside
from projections.read_models.store import ReadModels

log = logging.getLogger(__name__)

BATCH = 1000
# a replay from 0 folds bigger batches, fewer and larger transactions: an eighth of the log each, within
# these bounds (a transaction's cost is mostly the pages it touches, scattered by the random node ids;
# smaller ones let the indexer beside the fold in sooner)
REBUILD_BATCHES = (10_000, 50_000)
INDEX_BATCH = 100  # texts per full-text indexing transaction, a few ms (the lock is let go between them)


class NotificationSource(Protocol):
    """What the runner needs of an eventsourcing Application."""

    recorder: Any
    mapper: Any


class BulkReader(Protocol):
    """Events of the notification log decoded in bulk (`storage.notifications.SQLiteNotifications`)."""

    def read(self, start: int, limit: int, stop: int | None = None) -> list[tuple[int, Any]]: ...


class ProjectionRunner:
    def __init__(self, source: NotificationSource, store: ReadModels, reader: BulkReader | None = None) -> None:
        """`reader`: reads the log faster than the source's recorder and mapper (None: those)."""
        self.source = source
        self.store = store
        self.reader = reader
        self.position = store.position()
        self.indexed_beside = 0  # texts the last rebuild's own indexing process indexed
        self._counted_at = -1  # the position at which the job rows were last counted
        self._lock = threading.Lock()

    def max_position(self) -> int:
        return int(self.source.recorder.max_notification_id() or 0)

    def catch_up(
        self,
        until: int | None = None,
        progress: Callable[[int], None] | None = None,
        wait: bool = True,
        batch: int = BATCH,
    ) -> int:
        """Fold notifications after the tracked position (up to `until`, or all); return the new position.

        `wait=False` (a caller that must not wait for another thread, such as the event loop): only if
        no other thread is folding just then, and only up to `until`; else nothing, and the position may
        still be short of `until`."""
        if not self._lock.acquire(blocking=wait):
            return self.position
        try:
            self.position = self.store.position()  # (other processes may fold into the same file)
            if until is not None and self.position < until:
                self._fold_recent(until)
            position = self._catch_up(until, progress, batch) if wait or until is not None else self.position
            if position != self._counted_at:  # (new job rows, perhaps folded by another process)
                self.store.count_jobs()
                self._counted_at = position
            return position
        finally:
            self._lock.release()

    def fold_read(self, after: int, batch: Sequence[tuple[int, Any]]) -> int:
        """Fold a batch another reader of the log read: every event after `after` up to its last (the
        part already folded is passed over; a batch that starts past the position is left, and the next
        catch-up reads the log). The position the tables are at."""
        with self._lock:
            self.position = self.store.apply(batch, after=after)
            if self.position != self._counted_at:  # (new job rows, perhaps: as `catch_up` counts them)
                self.store.count_jobs()
                self._counted_at = self.position
            return self.position

    def _fold_recent(self, until: int) -> None:
        """Up to `until` straight from the events the source just saved, when it still holds exactly
        the next ones (no other process wrote in between, and none folded past them): no reading back,
        no decoding."""
        recent = getattr(self.source, "recent", None)
        batch = recent(self.position, until) if recent is not None else None
        if batch:
            try:
                self.position = self.store.apply(batch)
            except Exception:
                log.exception("read models stopped: an event after position %s failed to fold", self.position)
                raise

    def _catch_up(self, until: int | None, progress: Callable[[int], None] | None, size: int) -> int:
        while until is None or self.position < until:
            batch = self._read(self.position + 1, size)
            if not batch:
                break
            try:
                self.position = self.store.apply(batch, after=self.position)
            except Exception:
                log.exception("read models stopped: an event after position %s failed to fold", self.position)
                raise
            if progress is not None:
                progress(len(batch))
            if len(batch) < size:
                break  # that was the end of the log: no need to ask again
        return self.position

    def _read(self, start: int, limit: int) -> list[tuple[int, Any]]:
        if self.reader is not None:
            return self.reader.read(start, limit)
        mapper = self.source.mapper
        return [
            (n.id, mapper.to_domain_event(n))
            for n in self.source.recorder.select_notifications(start=start, limit=limit)
        ]

    def index_search(self, limit: int | None = None) -> int:
        """Bring the full-text index up to date with the texts folded so far (at most `limit` texts,
        for a background step that should not hold the lock for long); return how many it indexed."""
        done = 0
        while limit is None or done < limit:
            size = INDEX_BATCH if limit is None else min(INDEX_BATCH, limit - done)
            with self._lock:
                step = self.store.index_texts(size)
            done += step
            if step < size:
                break
        return done

    def adopt(self, path: str, rebuilt: bool = True) -> int:
        """Switch to a read-model file rebuilt beside this process (complete up to some position); the
        position it holds (the next catch-up folds what was written after it). A file that is not a
        finished rebuild is refused (ValueError, or the error opening it) and nothing changes — unless
        `rebuilt` is False: a file that was in use before (switched back to)."""
        with self._lock:
            self.store.reopen(path, rebuilt)
            self.position = self.store.position()
            return self.position

    def rebuild(self, progress: Callable[[int], None] | None = None, search: bool = True) -> int:
        """Drop the read models and replay the whole log into them, and (`search`) the full-text index
        with them: by a process of its own beside the fold when the read models are a file, what it
        left afterwards (else whoever searches first, or the service's background indexing, brings it
        up). `indexed_beside` then counts the texts that process indexed (a text changed twice may
        count twice)."""
        self.store.drop()
        self.position = 0
        indexer = self._indexer() if search else None
        try:
            with self.store.bulk_load():
                low, high = REBUILD_BATCHES
                position = self.catch_up(progress=progress, batch=min(high, max(low, self.max_position() // 8)))
                if indexer is not None:
                    indexer.finish()  # (it finishes while the indexes are made)
        except BaseException:
            if indexer is not None:
                indexer.stop()  # (the file is not finished: no use indexing the rest of it)
            raise
        self.indexed_beside = indexer.join() if indexer is not None else 0
        self.store.checkpoint()  # (the load and the indexer beside it left everything in the log)
        if search:
            self.index_search()
        return position

    def _indexer(self) -> IndexerBeside | None:
        if not _plain_file(self.store.path):
            return None
        try:
            return IndexerBeside(self.store.path)
        except (OSError, ValueError) as exc:  # (no interpreter to start, or no processes left)
            log.warning("the full-text index is built after the rebuild, not beside it: %s", exc)
            return None


def _plain_file(path: str) -> bool:
    """A read-model file another process can open by its name (not in memory, not a URI)."""
    return path not in ("", ":memory:") and not path.startswith("file:")
