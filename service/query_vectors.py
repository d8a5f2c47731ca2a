"""Recall's query vectors: the user's words embedded for a search, by the embedder in this process (on a
thread of their own, one at a time, never behind an index build; words no search waits for any more at
the lowest priority, for the next search of the same words) or by an endpoint (on the event loop, before
the search: the writer thread never waits for the network); each vector — or the embedder's failure, for
`retry_seconds` — kept for the next search of the same words (a regenerate, the engine's own reads)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor

import numpy as np

from domain.ports import Embedder
from providers.embedders import lowest_priority

log = logging.getLogger("service.recall")
QUERY_VECTORS = 512  # query texts whose vectors (or failure) are kept
AHEAD_MOST = 8  # query embeddings under way or queued past which words are not embedded ahead


class QueryVectors:
    def __init__(
        self, embedder: Embedder | None, retry_seconds: Callable[[], float], query_seconds: float, vector_wait: float
    ) -> None:
        self.embedder, self.retry_seconds = embedder, retry_seconds
        self.query_seconds, self.vector_wait = query_seconds, vector_wait
        # query text → (its vector, or None where the embedder failed; when, monotonic)
        self._query_vectors: OrderedDict[str, tuple[np.ndarray | None, float]] = OrderedDict()
        background = embedder.background_thread if embedder is not None else lowest_priority
        self._queries = ThreadPoolExecutor(1, thread_name_prefix="changji-recall-query")  # query embeddings
        # ... and those no search waits for (longer than it waits), for the next search of the same words
        self._later = ThreadPoolExecutor(1, "changji-recall-later", initializer=background)
        self._later_queued: tuple[str, Future[np.ndarray | None]] | None = None
        self._embedding: dict[str, Future[np.ndarray | None]] = {}  # query texts on their way to a vector
        self._lock = threading.Lock()

    async def prepare(self, query: str) -> None:
        """Embed `query` now, on the loop, waiting at most `query_seconds`; a failure is kept (the search
        goes by words alone)."""
        assert self.embedder is not None
        if not self.embedder.remote:  # (on the query thread: a search of the same words finds it under way)
            running = self.embed_soon(query)
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(running)), self.query_seconds)
            except TimeoutError:
                pass
            except asyncio.CancelledError:
                if not running.cancelled():  # (dropped by a search that gave up on it: not this task's cancel)
                    raise
            return
        vector: np.ndarray | None = None
        try:
            vector = (await asyncio.wait_for(self.embedder.embed([query], "query"), self.query_seconds))[0]
        except Exception as exc:
            log.warning("embedding a recall query failed (%r): it is searched by words alone", exc)
        self._keep_query_vector(query, vector)

    def embed_ahead(self, query: str) -> None:
        """Start embedding `query` (an embedder in this process, words not known yet) for a search of those
        words soon, when the embedder is expected to have it within the search's wait; returns at once.
        (Longer words are left to the search, which sends them to the lowest priority: started here, they
        would take a core from the work before the search.)"""
        if self.embedder is None or self.embedder.remote or self.embedder.instant or not query.strip():
            return
        if len(self._embedding) >= AHEAD_MOST:  # (a burst of requests: their searches ask for themselves)
            return
        if self.embedder.query_seconds(query) <= self.vector_wait:
            self.embed_soon(query)

    def embed_soon(self, query: str, later: bool = False) -> Future[np.ndarray | None]:
        """The query's vector (None: the embedder failed) from the embedder in this process: known, under
        way, or asked of it now — on the query thread, or `later` on a thread at the lowest priority."""
        known = self._known_query_vector(query)
        if known is not None:
            done: Future[np.ndarray | None] = Future()
            done.set_result(known[0])
            return done
        with self._lock:
            running = self._embedding.get(query)
            queued = self._later_queued
            if running is not None and not later and queued is not None and queued[1] is running and running.cancel():
                running = None  # (waited for now: off the lowest priority's queue, onto the query thread)
            if running is None:
                if later:  # (only the newest words wait there: those a regenerate would search again)
                    if queued is not None and queued[1].cancel() and self._embedding.get(queued[0]) is queued[1]:
                        del self._embedding[queued[0]]
                    running = self._later.submit(self._embed_query, query)
                    self._later_queued = (query, running)
                else:
                    running = self._queries.submit(self._embed_query, query)
                self._embedding[query] = running
            return running

    def _embed_query(self, query: str) -> np.ndarray | None:
        assert self.embedder is not None
        vector: np.ndarray | None = None
        try:
            vector = self.embedder.encode([query], "query")[0]
        except Exception as exc:
            log.warning("embedding a recall query failed (%r): it is searched by words alone", exc)
        with self._lock:
            self._remember_query_vector(query, vector)
            self._embedding.pop(query, None)
        return vector

    def vector(self, query: str, seconds: float | None = None) -> np.ndarray | None:
        """The query's vector: prepared, or embedded by an embedder in this process if it comes within
        `seconds` (None: however long it takes). None: BM25 alone — not prepared for an endpoint, which is
        never waited for here, not in time (or not expected to be: then embedded at the lowest priority,
        for the next search of the same words), or the embedder failed. An embedding nobody waits for any
        more is dropped unless it has begun."""
        known = self._known_query_vector(query)
        if known is not None:
            return known[0]
        assert self.embedder is not None
        if self.embedder.remote:
            log.info("a recall query was not embedded ahead: it is searched by words alone")
            return None
        if self.embedder.instant:  # (about as fast as a hash: here, no thread)
            return self._embed_query(query)
        if seconds is not None and self.embedder.query_seconds(query) > seconds:
            self.embed_soon(query, later=True)  # (or under way already)
            log.info("a recall query would take longer than %s s to embed: this search goes by words alone", seconds)
            return None
        running = self.embed_soon(query)
        try:
            return running.result(timeout=seconds)
        except (TimeoutError, CancelledError):
            if running.cancel():
                with self._lock:
                    if self._embedding.get(query) is running:
                        del self._embedding[query]
            log.info("a recall query's vector did not come within %s s: this search goes by words alone", seconds)
            return None

    def _known_query_vector(self, query: str) -> tuple[np.ndarray | None] | None:
        """(the vector,) when known — (None,) for a failure within `retry_seconds` — else None."""
        with self._lock:
            known = self._query_vectors.get(query)
        if known is None or (known[0] is None and time.monotonic() - known[1] >= self.retry_seconds()):
            return None
        return (known[0],)

    def has(self, query: str) -> bool:
        return self._known_query_vector(query) is not None

    def _keep_query_vector(self, query: str, vector: np.ndarray | None) -> None:
        with self._lock:
            self._remember_query_vector(query, vector)

    def _remember_query_vector(self, query: str, vector: np.ndarray | None) -> None:
        """(holding `_lock`)"""
        self._query_vectors[query] = (vector, time.monotonic())
        self._query_vectors.move_to_end(query)
        while len(self._query_vectors) > QUERY_VECTORS:
            self._query_vectors.popitem(last=False)

    def stop(self) -> None:
        self._queries.shutdown(wait=True, cancel_futures=True)
        self._later.shutdown(wait=True, cancel_futures=True)
