"""Fusing rankings: reciprocal rank fusion (each retriever's rank r adds weight / (k + r)).

k = 3, not the customary 60: measured on LoCoMo (`ops/bench/locomo_recall.py`, BM25 + e5 over turn
passages, tuned on conv-26 and conv-30 only), k from 1 to 5 ranks alike and k = 60 loses 3–4 points of
recall@5; a small k lets a passage that one retriever ranks first stay near the top."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 3


@dataclass(slots=True)
class Fused:
    """One passage as the fusion ranks it: its fused score, and each retriever's rank and score."""

    position: int
    score: float = 0.0
    found_by: dict[str, tuple[int, float]] = field(default_factory=dict)  # retriever → (rank, its score)


def fuse(
    rankings: Mapping[str, Sequence[tuple[int, float]]], weights: Mapping[str, float] | None = None, k: int = RRF_K
) -> list[Fused]:
    """Rankings of (position, score), best first, per retriever → one ranking, best first."""
    fused: dict[int, Fused] = {}
    for name, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, (position, score) in enumerate(ranking, 1):
            hit = fused.setdefault(position, Fused(position))
            hit.score += weight / (k + rank)
            hit.found_by[name] = (rank, score)
    return sorted(fused.values(), key=lambda hit: (-hit.score, hit.position))
