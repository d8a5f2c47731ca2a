"""Recall as the running service keeps it: one index per story over its archive, built on a thread of
its own whenever the archive moved on, never on a turn's path.

A recall uses the story's index as it stands, however far behind (the newest turns it may lack are
in the verbatim window anyway) and asks for a fresh one in the background. Embeddings are cached
(`service/passage_vectors.py`) so a rebuilt index embeds only what is new. Indexes live in memory, at most
`max_stories` of them (the least recently used goes first); a story whose archive is empty (none yet,
or deleted) has none.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from uuid import UUID

from projections.read_models.store import ReadModels
from projections.recall.dense_text import previous_passages, with_previous
from projections.recall.story_index import Hit, StoryIndex
from projections.recall.terms import lexical_terms
from service.passage_vectors import LocalEmbedder, PassageVectors, keep_recent
from storage.embedding_cache import EmbeddingCache

log = logging.getLogger(__name__)
MIN_BUILD_SECONDS = 2.0  # a story's index is rebuilt at most this often (turns in a row share one build)


@dataclass(frozen=True, slots=True)
class IndexState:
    """What `GET …/index` reports: the passages indexed, how far behind the archive, the embedder."""

    passages: int
    index_seq: int
    archive_seq: int
    embedder: str
    building: bool


class Recall:
    def __init__(
        self,
        store: ReadModels,
        embedder: LocalEmbedder | None,
        max_stories: int = 64,
        saved: EmbeddingCache | None = None,
    ) -> None:
        """`saved`: embeddings kept on disk across restarts (None: in memory only)."""
        self.store, self.embedder, self.max_stories, self.saved = store, embedder, max_stories, saved
        self._indexes: OrderedDict[UUID, StoryIndex] = OrderedDict()
        self._vectors = PassageVectors(embedder, saved) if embedder is not None else None
        self._terms: OrderedDict[str, list[str]] = OrderedDict()  # sha256 of text → lexical terms
        self._built: dict[UUID, float] = {}  # when each story's index was last built (monotonic)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="changji-recall")  # index builds
        self._queries = ThreadPoolExecutor(1, thread_name_prefix="changji-recall-query")  # searches, time-limited
        self._building: dict[UUID, Future[StoryIndex | None]] = {}
        self._lock = threading.Lock()

    @property
    def embedder_name(self) -> str:
        return self.embedder.model if self.embedder is not None else "none (BM25 only)"

    def index(self, story_id: UUID) -> StoryIndex | None:
        with self._lock:
            index = self._indexes.get(story_id)
            if index is not None:
                self._indexes.move_to_end(story_id)
            return index

    def refresh_soon(self, story_id: UUID) -> Future[StoryIndex | None]:
        """Rebuild the story's index in the background if its archive moved on (one build at a time)."""
        with self._lock:
            running = self._building.get(story_id)
            if running is not None and not running.done():
                return running
            future = self._pool.submit(self._rebuild, story_id)
            self._building[story_id] = future
            return future

    async def refresh(self, story_id: UUID) -> StoryIndex | None:
        """Bring the story's index up to date with the archive and wait for it."""
        return await asyncio.wrap_future(self.refresh_soon(story_id))

    def state(self, story_id: UUID) -> IndexState:
        index = self.index(story_id)
        running = self._building.get(story_id)
        return IndexState(
            len(index.rows) if index else 0,
            index.seq if index else 0,
            self.store.archive_seq(story_id),
            self.embedder_name,
            running is not None and not running.done(),
        )

    def search(
        self, story_id: UUID, query: str, k: int, before_depth: int, on_path: Callable[[str], bool]
    ) -> list[Hit]:
        """The best `k` passages for `query` older than `before_depth` on the path, from the index as it
        is now; a fresh index is asked for when the archive moved on."""
        index = self.index(story_id)
        if index is None or index.seq < self.store.archive_seq(story_id):
            self.refresh_soon(story_id)
        if index is None or not query.strip():
            return []
        vector = self.embedder.encode([query], "query")[0] if self.embedder is not None and index.vectors else None
        return index.search(query, vector, k, before_depth, on_path)

    def forget(self, story_id: UUID) -> None:
        """Drop a story's index (the story was deleted)."""
        with self._lock:
            self._indexes.pop(story_id, None)

    def _rebuild(self, story_id: UUID) -> StoryIndex | None:
        wait = self._built.get(story_id, 0.0) + MIN_BUILD_SECONDS - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # this thread only builds: the turns meanwhile join this build
        self._built[story_id] = time.monotonic()
        seq = self.store.archive_seq(story_id)
        current = self.index(story_id)
        rows = self.store.passages(story_id) if seq and (current is None or current.seq < seq) else []
        if not seq or (current is None and not rows):  # nothing archived (yet, or any more)
            with self._lock:
                self._indexes.pop(story_id, None)
            return None
        if current is not None and current.seq >= seq:
            return current
        try:
            texts = [row["text"] for row in rows]
            vectors = None
            if self._vectors is not None:
                previous = previous_passages(rows, self.store.parents(story_id))
                vectors = self._vectors.of(with_previous(texts, previous))
            index = StoryIndex(seq, rows, vectors, self._lexical_terms(texts))
        except Exception:
            log.exception("indexing story %s failed; its recall stays as it was", story_id)
            return current
        with self._lock:
            self._indexes[story_id] = index
            self._indexes.move_to_end(story_id)
            while len(self._indexes) > self.max_stories:
                self._indexes.popitem(last=False)
        return index

    def _lexical_terms(self, texts: list[str]) -> list[list[str]]:
        keys = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
        found = {key: self._terms[key] for key in keys if key in self._terms}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                found[key] = lexical_terms(text)
        keep_recent(self._terms, found)
        return [found[key] for key in keys]

    def search_within(
        self, seconds: float, story_id: UUID, query: str, k: int, before_depth: int, on_path: Callable[[str], bool]
    ) -> list[Hit]:
        """`search`, given up after `seconds` (the turn goes on without recall; the search finishes unseen)."""
        future = self._queries.submit(self.search, story_id, query, k, before_depth, on_path)
        try:
            return future.result(timeout=seconds)
        except TimeoutError:
            log.warning("recall for story %s took over %s s: this turn goes on without it", story_id, seconds)
            return []

    async def stop(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._queries.shutdown(wait=True, cancel_futures=True)
        if self.saved is not None:
            self.saved.close()
