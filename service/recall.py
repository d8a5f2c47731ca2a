"""Recall as the running service keeps it: one index per story over its archive, built on a thread of
its own (at the lowest CPU priority) whenever the archive moved on, never on a turn's path.

A recall uses the story's index as it stands, however far behind (the newest turns it may lack are
in the verbatim window anyway) and asks for a fresh one in the background. Where more than `embed_chunk`
passages wait for a vector (an import, a restart without the embeddings file), the story's first index is
by words alone (with the vectors already kept); the vectors are made `embed_chunk` passages a build, the
oldest first, each build of a long backlog queued behind the builds other stories asked for
meanwhile, and join the ranking once they are all made (the oldest passages alone, ranked by vectors,
crowd out the newest, which only words rank: measured, a partial dense ranking put a weak old match
above the answer) — so a long import is searched by its words at once, and a playing story's new passages wait
for one share of it, not all of it. Embeddings are cached
(`service/passage_vectors.py`) so a rebuilt index embeds only what is new. Indexes live in memory, at most
`max_stories` of them (the least recently used goes first); a story whose archive is empty (none yet,
or deleted) has none.

Queries are embedded ahead of the search where the caller can (`prepare`, on the event loop: the
context is assembled on the writer thread, which must not wait for an embeddings endpoint) and kept
for the next search of the same words (a regenerate, the engine's own reads). An embedder in this
process embeds queries on a thread of their own, one at a time, never behind an index build (e5 embeds
passages on threads of its own, at the lowest priority); a search waits at most `vector_wait` for its
query's vector and otherwise goes by words alone, the vector kept for the next search of those words.
A caller that knows the words early (the proxy, as a request arrives) starts their embedding with
`embed_ahead`, so the wait overlaps the work before the search; `vectors` counts the searches that had
their vector in time and those that went by words for want of it.
An embedder that fails leaves BM25 alone: a query it could not embed is searched by words, and an index
it could not embed is built without vectors and built again after `RETRY_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np

from domain.ports import Embedder
from projections.read_models.store import ReadModels
from projections.recall.dense_text import previous_passages, with_previous
from projections.recall.lexical import Vocabulary
from projections.recall.story_index import Hit, StoryIndex
from providers.embedders import lowest_priority
from service.passage_vectors import PassageVectors
from service.query_vectors import QueryVectors
from storage.embedding_cache import EmbeddingCache

log = logging.getLogger(__name__)
MIN_BUILD_SECONDS = 2.0  # a story's index is rebuilt at most this often (turns in a row share one build)
# ... and after a build of d seconds, not before BUILD_REST × d: a rebuild takes time in proportion to
# the archive, so a long story that keeps moving would otherwise keep a core busy rebuilding; this way
# builds take at most 1 / (1 + BUILD_REST) of the time, whatever the story's length (its index lags
# by a few more turns, which the verbatim window holds anyway)
BUILD_REST = 19.0
RETRY_SECONDS = 30.0  # after the embedder failed, the wait before a story's vectors are tried again
# how long a search waits for its query's vector from an embedder in this process (the service's own
# default is `Settings.recall_vector_wait`): e5 takes some 2 ms and 0.65 ms a token of the words on two
# idle cores (a short question: 9 ms; 55 tokens: 40 ms)
VECTOR_WAIT = 0.2
VOCABULARY_TERMS = 500_000  # terms numbered before the builds start on a new vocabulary
EMBED_CHUNK = 256  # passages a build embeds at most: an index by words comes first, the vectors join a share at a time


@dataclass(frozen=True, slots=True)
class IndexState:
    """What `GET …/index` reports: the passages indexed, how far behind the archive, the embedder."""

    passages: int
    summary_passages: int
    index_seq: int
    archive_seq: int
    embedder: str
    building: bool
    dense: bool
    dense_passages: int  # the passages with a vector (the oldest first: a long backlog is embedded a share at a time)


class Recall:
    def __init__(
        self,
        store: ReadModels,
        embedder: Embedder | None,
        max_stories: int = 64,
        saved: EmbeddingCache | None = None,
        query_seconds: float = 5.0,
        vector_wait: float = VECTOR_WAIT,
    ) -> None:
        """`saved`: embeddings kept on disk across restarts (None: in memory only); `query_seconds`: how
        long `prepare` waits for a query's vector; `vector_wait`: how long a search waits for it (an
        embedder in this process) before it goes by words alone."""
        self.store, self.embedder, self.max_stories, self.saved = store, embedder, max_stories, saved
        self.query_seconds, self.vector_wait = query_seconds, vector_wait
        self.retry_seconds, self.build_pause = RETRY_SECONDS, MIN_BUILD_SECONDS
        self.build_rest = BUILD_REST
        self._indexes: OrderedDict[UUID, StoryIndex] = OrderedDict()
        self._vectors = PassageVectors(embedder, saved) if embedder is not None else None
        self._vocabulary = Vocabulary()  # passages' terms counted once, for every build of every story
        # what a story's last build read, for the next to read only what changed since: its nodes'
        # parents (and how far they were read), and each passage as the dense retriever reads it
        self._parents: dict[UUID, tuple[int, dict[str, str]]] = {}
        self._contexts: dict[UUID, dict[tuple[str, str], str]] = {}
        self._read_from: dict[UUID, int] = {}  # the read-model file (its generation) each index was built from
        self._forgotten: dict[UUID, int] = {}  # how often each story was forgotten (a build under way stores nothing)
        self._next_build: dict[UUID, float] = {}  # when each story's index may be built next (monotonic)
        self._retry_at: dict[UUID, float] = {}  # when a story's vectors may be tried again after a failure
        # index builds, at the lowest priority: a build gives way to a turn and to a query's embedding
        background = embedder.background_thread if embedder is not None else lowest_priority
        self._pool = ThreadPoolExecutor(1, "changji-recall", initializer=background)
        self.queries = QueryVectors(embedder, lambda: self.retry_seconds, query_seconds, vector_wait)
        self._building: dict[UUID, Future[StoryIndex | None]] = {}
        self._stopping = False
        self.embed_chunk = EMBED_CHUNK
        self._lock = threading.Lock()
        # searches of an index with vectors: "in_time" had the query's vector, "late" went by words alone
        self.vectors: Counter[str] = Counter()

    @property
    def embedder_name(self) -> str:
        return self.embedder.model if self.embedder is not None else "none (BM25 only)"

    def index(self, story_id: UUID) -> StoryIndex | None:
        with self._lock:
            index = self._indexes.get(story_id)
            if index is not None:
                self._indexes.move_to_end(story_id)
            return index

    def refresh_soon(self, story_id: UUID, now: bool = False) -> Future[StoryIndex | None]:
        """Rebuild the story's index in the background if its archive moved on (one build at a time).
        `now`: without the rest a build earned (someone waits for an index that holds every write)."""
        with self._lock:
            running = self._building.get(story_id)
            if running is not None and not running.done():
                return running
            current = self._indexes.get(story_id)
            if not now and current is not None and self._resting(story_id):
                done: Future[StoryIndex | None] = Future()  # (as `_rebuild` would answer: no hop to its thread)
                done.set_result(current)
                return done
            future = self._pool.submit(self._rebuild, story_id, now)
            self._building[story_id] = future
        future.add_done_callback(functools.partial(self._go_on, story_id))
        return future

    def _go_on(self, story_id: UUID, built: Future[StoryIndex | None]) -> None:
        """A build that embedded its share of a long backlog goes on, behind the builds asked for meanwhile
        (a playing story's new passages wait for one share of an import's, not for all of it)."""
        if built.cancelled() or built.exception() is not None:
            return
        index = built.result()
        with self._lock:
            going_on = index is not None and index.unfinished and self._indexes.get(story_id) is index
            going_on = going_on and not self._stopping
        if going_on:
            with contextlib.suppress(RuntimeError):  # (the pool shut down meanwhile: the service stops)
                self.refresh_soon(story_id, now=True)

    async def refresh(self, story_id: UUID, all_vectors: bool = True) -> StoryIndex | None:
        """Bring the story's index up to date with the archive and wait for it (a caller that gives up
        leaves the build running for the others waiting on it); `all_vectors`: and for a backlog's vectors,
        share after share, while they come (else an index by words will do)."""
        wanted = await asyncio.to_thread(self.store.archive_seq, story_id)  # (a read: not on the loop)
        index = await asyncio.shield(asyncio.wrap_future(self.refresh_soon(story_id, now=True)))
        if wanted and (index is None or index.seq < wanted):  # it joined a build that began before the
            # write, or before the story was forgotten (deleted, then restored): that one keeps nothing
            index = await asyncio.shield(asyncio.wrap_future(self.refresh_soon(story_id, now=True)))
        while all_vectors and index is not None and index.unfinished:  # (a long backlog: all of it)
            done = index.dense_count
            index = await asyncio.shield(asyncio.wrap_future(self.refresh_soon(story_id, now=True)))
            if index is None or index.dense_count <= done:  # (no headway: the embedder failing, say)
                break
        return index

    def state(self, story_id: UUID) -> IndexState:
        index = self.index(story_id)
        running = self._building.get(story_id)
        return IndexState(
            len(index.rows) if index else 0,
            len(index.episode_positions) if index else 0,
            index.seq if index else 0,
            self.store.archive_seq(story_id),
            self.embedder_name,
            running is not None and not running.done(),
            index is not None and index.vectors is not None,
            index.dense_count if index is not None else 0,
        )

    def search(
        self,
        story_id: UUID,
        query: str,
        k: int,
        before_depth: int,
        on_path: Callable[[str], bool],
        shown_episodes: Collection[str] | None = (),
        search: str | None = None,
    ) -> list[Hit]:
        """The best `k` passages for `query` (and the side model's `search` for it, if any) older than
        `before_depth` on the path (episode summaries but those in `shown_episodes`; None: none), from the
        index as it is now; a fresh index is asked for when the archive moved on."""
        index = self.index(story_id)
        wanted = index is not None and index.vectors is not None and query.strip()
        vector = self.queries.vector(query, self.vector_wait) if wanted else None
        if wanted:
            self.vectors["in_time" if vector is not None else "late"] += 1
        return self._search(story_id, index, query, vector, k, before_depth, on_path, shown_episodes, search)

    def _search(
        self,
        story_id: UUID,
        index: StoryIndex | None,
        query: str,
        vector: np.ndarray | None,
        k: int,
        before_depth: int,
        on_path: Callable[[str], bool],
        shown_episodes: Collection[str] | None,
        search: str | None,
        spare: int = 0,
    ) -> list[Hit]:
        if index is None or not index.complete or index.seq < self.store.archive_seq(story_id):
            self.refresh_soon(story_id)
        if index is None or not query.strip():
            return []
        return index.search(query, vector, k, before_depth, on_path, shown_episodes, search, spare)

    async def prepare(self, story_id: UUID, query: str) -> None:
        """Embed `query` now, on the loop, for a search about to run elsewhere (the writer thread must not
        wait for an embeddings endpoint). Waits at most `query_seconds`; a failure is kept, and that
        search goes by words alone."""
        if self.embedder is None or not query.strip() or self.queries.has(query):
            return
        index = self.index(story_id)
        if index is None or index.vectors is None:
            return
        await self.queries.prepare(query)

    def embed_ahead(self, query: str) -> None:
        """Start embedding `query` for a search of those words soon (`QueryVectors.embed_ahead`)."""
        self.queries.embed_ahead(query)

    def embed_soon(self, query: str, later: bool = False) -> Future[np.ndarray | None]:
        return self.queries.embed_soon(query, later)

    def forget(self, story_id: UUID) -> None:
        """Drop a story's index (the story was deleted)."""
        with self._lock:
            self._indexes.pop(story_id, None)
            self._parents.pop(story_id, None)
            self._contexts.pop(story_id, None)
            self._forgotten[story_id] = self._forgotten.get(story_id, 0) + 1

    def _resting(self, story_id: UUID) -> bool:
        """Whether a background refresh of a story that has an index is not due yet: the embedder failed
        lately (no try before its time), or the story rests after a long build (no sleep on the one
        build thread)."""
        failing = self._retry_at.get(story_id, 0.0) > time.monotonic()
        return failing or self._next_build.get(story_id, 0.0) - time.monotonic() > self.build_pause

    def _rebuild(self, story_id: UUID, now: bool = False) -> StoryIndex | None:
        current = self.index(story_id)
        if not now and current is not None and self._resting(story_id):
            return current  # (a search then asks again)
        failing = self._retry_at.get(story_id, 0.0) > time.monotonic()  # the embedder failed lately
        wait = self._next_build.get(story_id, 0.0) - time.monotonic()
        if not now and current is not None and wait > 0:  # (a story without an index, or a caller waiting, goes first)
            time.sleep(wait)  # this thread only builds: the turns meanwhile join this build
        self._next_build[story_id] = time.monotonic() + self.build_pause
        return self._build(story_id, embed=not failing)  # (while the embedder is failing: words alone)

    def _share(self, texts: list[str], current: StoryIndex | None) -> int | None:
        """How many passages this build embeds (None: all). Where more than `embed_chunk` wait for a vector
        and the vectors are kept on disk (each share stays made) by an embedder that takes its time, a
        share — none in the story's first index, which is by words — else all of them."""
        assert self._vectors is not None
        if self.saved is None or self._vectors.embedder.instant or self._vectors.missing(texts) <= self.embed_chunk:
            return None
        return self.embed_chunk if current is not None else 0

    def _rest_after(self, story_id: UUID, seconds: float) -> None:
        """A build that took `seconds` (embedding new passages aside) rests `build_rest` times as long
        before a background refresh builds again."""
        until = time.monotonic() + max(self.build_pause, self.build_rest * seconds)
        self._next_build[story_id] = max(self._next_build.get(story_id, 0.0), until)

    def _build(self, story_id: UUID, embed: bool = True) -> StoryIndex | None:
        with self._lock:
            forgotten = self._forgotten.get(story_id, 0)
        if len(self._vocabulary) > VOCABULARY_TERMS:  # (numbers, codes: terms come and never go; indexes keep theirs)
            self._vocabulary = Vocabulary()
        seq = self.store.archive_seq(story_id)
        current = self.index(story_id)
        fresh = current is not None and current.seq >= seq and (current.complete or not embed)
        rows = self._rows(story_id, current) if seq and not fresh else []
        if not seq or (current is None and not rows):  # nothing archived (yet, or any more)
            with self._lock:
                self._indexes.pop(story_id, None)
            self._parents.pop(story_id, None)
            self._contexts.pop(story_id, None)
            return None
        if fresh:
            return current
        started, embedding = time.monotonic(), 0.0
        try:
            texts = [row["text"] for row in rows]
            made: dict[tuple[str, str], str] = {}
            previous = previous_passages(rows, self._parents_of(story_id))
            in_context = with_previous(texts, previous, self._contexts.get(story_id), made)
            self._contexts[story_id] = made  # (what this build used: the next one's to look in)
            vectors, complete = None, self._vectors is None or embed
            if self._vectors is not None and embed:
                try:
                    embedding = time.monotonic()
                    share = self._share(in_context, current)
                    vectors = self._vectors.of(in_context, share)
                    if len(vectors) < len(in_context):  # (more to embed: this share now, the rest after the
                        complete = False  # other stories' builds waiting, by words alone meanwhile)
                except Exception as exc:  # the embedder failed: words alone until it is tried again
                    log.warning("embedding story %s failed (%r): its recall is BM25 alone for now", story_id, exc)
                    complete = False
                    self._retry_at[story_id] = time.monotonic() + self.retry_seconds
                finally:
                    embedding = time.monotonic() - embedding
            whole = vectors is not None and len(vectors) == len(in_context)
            index = StoryIndex(
                seq, rows, vectors if whole else None, None, complete, in_context, None, self._vocabulary
            )
            index.dense_count = len(vectors) if vectors is not None else 0
            index.unfinished = vectors is not None and not whole
            self._rest_after(story_id, time.monotonic() - started - embedding)
        except Exception:
            log.exception("indexing story %s failed; its recall stays as it was", story_id)
            return current
        with self._lock:
            if self._forgotten.get(story_id, 0) != forgotten:  # deleted while this was built: not kept
                self._parents.pop(story_id, None)
                self._contexts.pop(story_id, None)
                return None
            self._indexes[story_id] = index
            self._indexes.move_to_end(story_id)
            while len(self._indexes) > self.max_stories:
                evicted, _ = self._indexes.popitem(last=False)
                self._parents.pop(evicted, None)  # (what its next build would have read on from)
                self._contexts.pop(evicted, None)
                self._read_from.pop(evicted, None)
        return index

    def _rows(self, story_id: UUID, current: StoryIndex | None) -> list[dict[str, Any]]:
        """The story's archive rows: those of its index still in the archive, and those changed since it
        was built, read anew (in the order of their last change, as `ReadModels.passages` gives them);
        all of them read anew for an index built from another read-model file."""
        generation = self.store.generation
        if current is None or self._read_from.get(story_id) != generation:
            self._parents.pop(story_id, None)
            self._contexts.pop(story_id, None)
            self._read_from[story_id] = generation
            return self.store.passages(story_id)
        changed = self.store.passages(story_id, after_seq=current.seq)
        kept = self.store.passage_ids(story_id) - {row["id"] for row in changed}  # (a revision may leave fewer)
        return [row for row in current.rows if row["id"] in kept] + changed

    def _parents_of(self, story_id: UUID) -> dict[str, str]:
        """The story's nodes → their parents, read since the last build (a node's parent never changes)."""
        read_to, parents = self._parents.get(story_id, (0, {}))
        more, read_to = self.store.parents_since(story_id, read_to)
        parents.update(more)
        self._parents[story_id] = (read_to, parents)
        return parents

    def search_within(
        self,
        seconds: float,
        story_id: UUID,
        query: str,
        k: int,
        before_depth: int,
        on_path: Callable[[str], bool],
        shown_episodes: Collection[str] | None = (),
        search: str | None = None,
        spare: int = 0,
    ) -> list[Hit]:
        """`search`, right here, waiting at most `seconds` (and `vector_wait`) for the query's vector from
        an embedder in this process (its words not embedded ahead); without it, by words alone. The
        search itself waits on no model (a read of the archive's position aside)."""
        index = self.index(story_id)
        wanted = self.embedder is not None and index is not None and index.vectors is not None and query.strip()
        vector = self.queries.vector(query, min(seconds, self.vector_wait)) if wanted else None
        if wanted:
            self.vectors["in_time" if vector is not None else "late"] += 1
        return self._search(story_id, index, query, vector, k, before_depth, on_path, shown_episodes, search, spare)

    async def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.queries.stop()
        if self.embedder is not None:
            await self.embedder.close()
        if self.saved is not None:
            self.saved.close()
