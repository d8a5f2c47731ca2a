"""Passage vectors kept for the next build: what a build would still have to embed is counted with one
read of the embeddings file, whatever the number of passages (a 10k-turn import asks about 12k of them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from providers.embedders import HashingEmbedder
from service.passage_vectors import PassageVectors
from storage.embedding_cache import EmbeddingCache


class CountedCache(EmbeddingCache):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.reads = 0

    def get_many(self, keys: Sequence[str], dimensions: int) -> dict[str, np.ndarray]:
        self.reads += 1
        return super().get_many(keys, dimensions)


def test_what_is_left_to_embed_is_counted_with_one_read_of_the_file(tmp_path: Path) -> None:
    texts = [f"第{i}段：灯塔的窗户又松了。" for i in range(3000)]
    cache = CountedCache(str(tmp_path / "embeddings.sqlite"))
    PassageVectors(HashingEmbedder(), cache).of(texts[:1200])  # (saved in the file by another build)
    later = PassageVectors(HashingEmbedder(), cache)  # (a restart: nothing in memory)
    cache.reads = 0
    assert later.missing(texts) == 1800 and cache.reads == 1
    assert len(later.of(texts)) == 3000 and later.missing(texts) == 0
