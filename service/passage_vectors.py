"""Passage embeddings as recall builds them: each text embedded once per embedder, kept in memory for
the next build (the most recent CACHED_TEXTS) and, when a file is given, on disk across restarts
(`storage/embedding_cache.py`). Keys are sha256 of (model, revision, dimensions, text)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from domain.ports import Embedder
from storage.embedding_cache import EmbeddingCache

EMBED_BATCH = 64
CACHED_TEXTS = 100_000  # passages whose vector is kept for the next build


class PassageVectors:
    def __init__(self, embedder: Embedder, saved: EmbeddingCache | None = None) -> None:
        self.embedder, self.saved = embedder, saved
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()

    def missing(self, texts: Sequence[str]) -> int:
        """How many of the texts have no vector kept (in memory or in the file): what `of` would encode."""
        keys = self._keys(texts)
        left = [key for key in keys if key not in self._recent]
        if self.saved is not None and left:
            saved = self.saved.get_many(left, self.embedder.dimensions)  # (one read of the file for them all)
            left = [key for key in left if key not in saved]
        return len(left)

    def _keys(self, texts: Sequence[str]) -> list[str]:
        model = f"{self.embedder.model}\x00{self.embedder.revision}\x00{self.embedder.dimensions}"
        return [hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest() for text in texts]

    def of(self, texts: Sequence[str], most: int | None = None) -> np.ndarray:
        """One vector per text, in order: from memory, then the file, and only the rest encoded. `most`:
        encode no more than that many; the vectors are then those of the texts up to the first one left
        unencoded (a prefix of `texts`, as long as that allows)."""
        size = self.embedder.dimensions
        keys = self._keys(texts)
        found = {key: self._recent[key] for key in keys if key in self._recent}
        if self.saved is not None and len(found) < len(keys):
            found.update(self.saved.get_many([key for key in keys if key not in found], size))
        missing = [i for i, key in enumerate(keys) if key not in found]
        if most is not None and len(missing) > most:
            keys, missing = keys[: missing[most]], missing[:most]  # (up to the first text left unencoded)
        for start in range(0, len(missing), EMBED_BATCH):
            batch = missing[start : start + EMBED_BATCH]
            made = dict(
                zip((keys[i] for i in batch), self.embedder.encode([texts[i] for i in batch], "passage"), strict=True)
            )
            found.update(made)
            if self.saved is not None:
                self.saved.put_many(made)
        keep_recent(self._recent, found)
        if not keys:
            return np.zeros((0, size), dtype=np.float32)
        return np.stack([found[key] for key in keys])


def keep_recent(cache: OrderedDict[str, Any], found: dict[str, Any]) -> None:
    """Remember what a build used, the most recent last, within CACHED_TEXTS."""
    for key, value in found.items():
        cache[key] = value
        cache.move_to_end(key)
    while len(cache) > CACHED_TEXTS:
        cache.popitem(last=False)
