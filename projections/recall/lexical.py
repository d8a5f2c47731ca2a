"""BM25 over a story's passages: the Lucene variant bm25s computes (k1 1.5, b 0.75; the same scores, to
float32 rounding — `tests/unit/test_lexical_bm25s.py` holds the two side by side), built with numpy from
each passage's counted terms.

An index is built whole and never changed, as bm25s's are; what makes a rebuild cheap is the
`Vocabulary` it is built with: terms are numbered once, and each passage's terms are counted once, for
every index built with the same vocabulary — a story's index is rebuilt as its archive grows, and only
the new passages are read again (bm25s reads every token of every passage in Python at each build:
0.6 s for the two indexes of a 10k-turn story)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from projections.recall.terms import lexical_terms

K1, B = 1.5, 0.75
EMPTY = "\u2400"  # the term of a passage without any: it still has a row
COUNTED = 600_000  # passages whose counted terms a vocabulary keeps (the least recently used go first)
COUNTED_BYTES = 192 << 20  # ... and how much of them, their texts counted (in characters) with them


class Vocabulary:
    """Term numbers and passages' counted terms, shared by the indexes built with it. Thread-safe.
    A passage is kept as one int32 record — its length in terms, its distinct terms' numbers, how often
    each occurs — by its text (so a text is counted as `lexical_terms` reads it, whoever asks)."""

    def __init__(self, passages: int = COUNTED, kept_bytes: int = COUNTED_BYTES) -> None:
        self._ids: dict[str, int] = {}
        self._counted: OrderedDict[str, bytes] = OrderedDict()
        self._most, self._most_bytes, self._bytes = passages, kept_bytes, 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many terms it has numbered (never fewer: a caller starts a new one past a bound)."""
        return len(self._ids)

    def counted(self, text: str, terms: Sequence[str] | None = None) -> bytes:
        """The passage's record (`terms`: its `lexical_terms`, when the caller has them)."""
        with self._lock:
            known = self._counted.get(text)
            if known is not None:
                self._counted.move_to_end(text)
                return known
        words = (terms if terms is not None else lexical_terms(text)) or [EMPTY]
        with self._lock:
            ids = self._ids
            counts: dict[int, int] = {}
            for term in words:
                number = ids.setdefault(term, len(ids))
                counts[number] = counts.get(number, 0) + 1
            record = np.array([len(words), *counts.keys(), *counts.values()], dtype=np.int32).tobytes()
            self._counted[text] = record
            self._bytes += len(record) + len(text)
            while len(self._counted) > self._most or self._bytes > self._most_bytes:
                gone, dropped = self._counted.popitem(last=False)
                self._bytes -= len(dropped) + len(gone)
            return record

    def number(self, term: str) -> int | None:
        return self._ids.get(term)


class LexicalIndex:
    """Built once over the passages' texts; `scored` gives every passage's score for a query."""

    def __init__(
        self, texts: Sequence[str], terms: Sequence[list[str]] | None = None, vocabulary: Vocabulary | None = None
    ) -> None:
        """`terms`: the texts' `lexical_terms`, when the caller has them already; `vocabulary`: one shared
        with earlier builds (the passages they counted are not counted again)."""
        self.size = len(texts)
        self.vocabulary = vocabulary if vocabulary is not None else Vocabulary(max(len(texts), 1))
        if terms is None:
            records = [self.vocabulary.counted(text) for text in texts]
        else:
            records = [self.vocabulary.counted(text, words) for text, words in zip(texts, terms, strict=True)]
        self._postings(records)

    def _postings(self, records: list[bytes]) -> None:
        """Each term's passages and their scores (the term's row: `indptr[t]:indptr[t + 1]`), read from
        the passages' records with a few array operations."""
        self._terms = np.zeros(0, np.int32)  # the vocabulary's numbers of this index's terms, sorted
        self._indptr, self._docs, self._scores = np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
        if not records:
            return
        sizes = np.fromiter(map(len, records), dtype=np.int64, count=len(records)) // 4
        flat = np.frombuffer(b"".join(records), dtype=np.int32)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        lengths = flat[starts].astype(np.float64)
        distinct = (sizes - 1) // 2
        docs = np.repeat(np.arange(len(records), dtype=np.int32), distinct)
        within = np.arange(len(docs)) - np.repeat(np.cumsum(distinct) - distinct, distinct)
        numbers = flat[np.repeat(starts + 1, distinct) + within]
        tf = flat[np.repeat(starts + 1 + distinct, distinct) + within].astype(np.float64)
        counts = np.bincount(numbers)  # (by the vocabulary's numbers: a passing array, bounded by its size)
        self._terms = np.flatnonzero(counts).astype(np.int32)  # the index keeps rows for its own terms only
        local = np.zeros(len(counts), dtype=np.int64)
        local[self._terms] = np.arange(len(self._terms))
        rows = local[numbers]
        df = counts[self._terms]
        n = len(records)
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)  # (as bm25s keeps it: float32)
        norm = K1 * ((1 - B) + B * lengths[docs] / lengths.mean())
        scores = (idf[rows].astype(np.float64) * (tf / (norm + tf))).astype(np.float32)
        order = np.argsort(rows)  # (a term's passages in any order: each once)
        self._docs, self._scores = docs[order], scores[order]
        self._indptr = np.concatenate(([0], np.cumsum(df)))

    def search(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(passage position, score) for the best `k` passages with a positive score; `allowed` is a
        0/1 mask over the passages (None: all)."""
        return top(self.scored(lexical_terms(query), allowed), k)

    def scored(self, terms: Sequence[str], allowed: np.ndarray | None = None) -> np.ndarray | None:
        """Every passage's score for the query's terms (0 where not `allowed`); None when no term is in
        the passages. Scoring reads the postings of the query's terms: a caller that needs more than one
        cut of the ranking (`top`) scores once."""
        if not self.size or not terms:
            return None
        known = [n for n in map(self.vocabulary.number, terms) if n is not None]
        numbers = np.array(known, dtype=self._terms.dtype)  # (of the terms' own type: a Python int searched
        # for would have every term of the index copied to 64 bits first, 0.6 ms a query at 100k turns)
        at = np.searchsorted(self._terms, numbers)
        found = at < len(self._terms)
        found[found] = self._terms[at[found]] == numbers[found]
        rows = at[found].tolist()  # (in the query's order)
        if not rows:
            return None
        scores = np.zeros(self.size, dtype=np.float32)
        for row in rows:  # (a term asked twice counts twice, as bm25s counts it)
            start, end = self._indptr[row], self._indptr[row + 1]
            np.add.at(scores, self._docs[start:end], self._scores[start:end])
        if allowed is not None:
            scores *= allowed > 0  # (in place)
        return scores


def top(scores: np.ndarray | None, k: int) -> list[tuple[int, float]]:
    """(position, score) of the best `k` positive scores, best first."""
    if scores is None or k <= 0:
        return []
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    return sorted(((int(i), float(scores[i])) for i in best if scores[i] > 0), key=lambda hit: -hit[1])
