"""BM25 over a story's passages (bm25s: sparse matrices, numpy scoring)."""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np

from projections.recall.terms import lexical_terms


class LexicalIndex:
    """Built once over the passages' texts; `search` ranks them for a query. Rebuilt, never updated in
    place (bm25s indexes are static): a story's index grows by rebuilding it in the background."""

    def __init__(self, texts: Sequence[str], terms: Sequence[list[str]] | None = None) -> None:
        """`terms`: the texts' `lexical_terms`, when the caller has them already."""
        self.size = len(texts)
        self._bm25 = bm25s.BM25()
        found = terms if terms is not None else [lexical_terms(text) for text in texts]
        corpus = [words or ["\u2400"] for words in found]  # an empty passage still has a row
        if self.size:
            self._bm25.index(corpus, show_progress=False)

    def search(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(passage position, score) for the best `k` passages with a positive score; `allowed` is a
        0/1 mask over the passages (None: all)."""
        return top(self.scored(lexical_terms(query), allowed), k)

    def scored(self, terms: Sequence[str], allowed: np.ndarray | None = None) -> np.ndarray | None:
        """Every passage's score for the query's terms (0 where not `allowed`); None when no term is
        known. Scoring reads every passage: a caller that needs more than one cut of the ranking (`top`)
        scores once."""
        if not self.size or not terms:
            return None
        vocab = self._bm25.vocab_dict
        known = [t for t in terms if t in vocab]
        if not known:
            return None
        scores: np.ndarray = self._bm25.get_scores(known)
        if allowed is not None:
            scores = np.where(allowed > 0, scores, 0.0)
        return scores


def top(scores: np.ndarray | None, k: int) -> list[tuple[int, float]]:
    """(position, score) of the best `k` positive scores, best first."""
    if scores is None or k <= 0:
        return []
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    return sorted(((int(i), float(scores[i])) for i in best if scores[i] > 0), key=lambda hit: -hit[1])
