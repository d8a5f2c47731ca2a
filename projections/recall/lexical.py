"""BM25 over a story's passages: the Lucene variant bm25s computes (k1 1.5, b 0.75; the same scores, to
float32 rounding — `tests/unit/test_lexical_bm25s.py` holds the two side by side), built with numpy from
each passage's counted terms.

An index is built whole and never changed, as bm25s's are; what makes a rebuild cheap is the
`Vocabulary` it is built with: terms are numbered once, and each passage's terms are counted once, for
every index built with the same vocabulary — a story's index is rebuilt as its archive grows, and only
the new passages are read again (bm25s reads every token of every passage in Python at each build:
0.6 s for the two indexes of a 10k-turn story).

A search (`ranked`) reads at most `EXACT_POSTINGS` postings over every passage, the query's rarest
terms first (and on past that while they find fewer passages than the cut rescores); its commoner
terms then score only the best passages those found (`Ranked.top`): Moffat and Zobel's "continue"
strategy, with the accumulators kept to the ones a cut can reach. The postings a query reads are then
bounded whatever the archive's length (a few vector passes over a mask of every passage remain) — a
turn's words are some 25 terms, and at 100k turns their postings come to half a million, most of them
a few common words'. Where all the query's
postings fit (any story up to some ten thousand turns), the ranking is exact; beyond it, the best
passages by every term are found among the best by the rarer ones (`tests/unit/test_lexical_ranked.py`
measures how many of the exact ranking's best it keeps)."""

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
EXACT_POSTINGS = 65_536  # a query's postings read over every passage (its rarest terms first; at least one)
RESCORED, RESCORED_MIN = 4, 160  # ... its other terms score the best RESCORED × k by those, at least RESCORED_MIN


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
        order = np.argsort(rows, kind="stable")  # (a term's passages in order: `Ranked.top` looks them up)
        self._docs, self._scores = docs[order], scores[order]
        self._indptr = np.concatenate(([0], np.cumsum(df)))

    def search(
        self,
        query: str,
        k: int,
        allowed: np.ndarray | None = None,
        exact_postings: int = EXACT_POSTINGS,
        least: int = RESCORED_MIN,
    ) -> list[tuple[int, float]]:
        """(passage position, score) for the best `k` passages with a positive score, as `ranked` ranks
        them; `allowed` is a mask over the passages (nonzero: allowed; None: all)."""
        ranking = self.ranked(lexical_terms(query), allowed, exact_postings, least)
        return ranking.top(k) if ranking is not None else []

    def scored(self, terms: Sequence[str], allowed: np.ndarray | None = None) -> np.ndarray | None:
        """Every passage's exact score for the query's terms (0 where not `allowed`, a mask as `ranked`
        takes it); None when no term is in the passages. It reads every posting of the query's terms
        (`ranked` reads a bounded share)."""
        rows = self._rows(terms)
        if not rows:
            return None
        scores = np.zeros(self.size, dtype=np.float32)
        for row in rows:  # (a term asked twice counts twice, as bm25s counts it)
            self._add(scores, row)
        if allowed is not None:
            scores *= allowed > 0  # (in place)
        return scores

    def ranked(
        self,
        terms: Sequence[str],
        allowed: np.ndarray | None = None,
        exact_postings: int = EXACT_POSTINGS,
        least: int = RESCORED_MIN,
    ) -> Ranked | None:
        """The query's ranking, to be cut (`Ranked.top`): the passages its rarest terms are in, scored by
        them (`exact_postings` of them at most, and the rarest term whatever its length; more while they
        find fewer than `least` allowed passages), and the rest of its terms kept to score the best of
        those (at least `least` of them); None when no term is in the passages. `allowed`: a mask over
        the passages (nonzero: allowed; None: all)."""
        rows = self._rows(terms)
        if not rows:
            return None
        asked: dict[int, int] = {}
        for row in rows:
            asked[row] = asked.get(row, 0) + 1
        distinct, times = np.fromiter(asked, np.int64, len(asked)), list(asked.values())
        lengths = self._indptr[distinct + 1] - self._indptr[distinct]
        by_length = np.argsort(lengths, kind="stable")
        order: list[int] = by_length.tolist()
        read = max(1, int(np.searchsorted(np.cumsum(lengths[by_length]), exact_postings, side="right")))
        scores = np.zeros(self.size, dtype=np.float32)
        for i in order[:read]:
            self._add(scores, int(distinct[i]), times[i])
        mask = None if allowed is None else allowed if allowed.dtype == np.bool_ else allowed > 0
        found = _found(scores, mask)
        while len(found) < least and read < len(order):  # too few allowed passages (the rarest terms'
            # all in the verbatim window, say): the next-rarest term is read over every passage too
            self._add(scores, int(distinct[order[read]]), times[order[read]])
            read += 1
            found = _found(scores, mask)
        later = [(int(distinct[i]), times[i]) for i in order[read:]]
        postings = int(lengths[by_length[:read]].sum())
        return Ranked(self, found.astype(self._docs.dtype), scores[found], later, postings, least)

    def _add(self, scores: np.ndarray, row: int, times: int = 1) -> None:
        """The row's term's score added to every passage it is in, `times` over."""
        start, end = self._indptr[row], self._indptr[row + 1]
        weights = self._scores[start:end]
        np.add.at(scores, self._docs[start:end], weights if times == 1 else weights * np.float32(times))

    def _rows(self, terms: Sequence[str]) -> list[int]:
        """The index's rows of the query's terms that it has, in the query's order (repeats kept)."""
        if not self.size or not terms:
            return []
        known = [n for n in map(self.vocabulary.number, terms) if n is not None]
        numbers = np.array(known, dtype=self._terms.dtype)  # (of the terms' own type: a Python int searched
        # for would have every term of the index copied to 64 bits first, 0.6 ms a query at 100k turns)
        at = np.searchsorted(self._terms, numbers)
        found = at < len(self._terms)
        found[found] = self._terms[at[found]] == numbers[found]
        rows: list[int] = at[found].tolist()
        return rows

    def _row_scores(self, row: int, positions: np.ndarray) -> np.ndarray:
        """The row's term's score in each of the passages at `positions` (0 where it is not in one)."""
        start, end = self._indptr[row], self._indptr[row + 1]
        docs = self._docs[start:end]
        at = np.minimum(np.searchsorted(docs, positions), len(docs) - 1)  # (both of one type: no copy)
        return np.where(docs[at] == positions, self._scores[start:end][at], np.float32(0))


class Ranked:
    """A query's ranking before its cut: the passages its rarer terms are in (`positions`, allowed ones
    only, in order), their scores by those terms, the commoner terms (row, times asked) that score the
    best of them at the cut, and how many postings were read over every passage (`postings`)."""

    def __init__(
        self,
        index: LexicalIndex,
        positions: np.ndarray,
        scores: np.ndarray,
        later: list[tuple[int, int]],
        postings: int,
        least: int = RESCORED_MIN,
    ) -> None:
        self.index, self.positions, self.scores, self.later, self.postings = index, positions, scores, later, postings
        self.least = least  # the fewest the commoner terms score (when there are as many)

    @property
    def exact(self) -> bool:
        """Whether every term was read over every passage (the cut is then exact BM25)."""
        return not self.later

    def top(self, k: int) -> list[tuple[int, float]]:
        """(position, score) of the best `k`, best first (of equal scores the first by position; which
        of them make the cut is the partition's); a commoner term adds its score to the best
        `RESCORED` × k by the rarer ones."""
        positions, scores = self.positions, self.scores
        if not self.later or k <= 0:
            return top(scores, k, positions)
        reach = max(RESCORED * k, self.least)
        if reach < len(scores):
            best = np.sort(_best(scores, reach))  # (in order: each term's lookups start where the last ended)
            positions, scores = positions[best], scores[best]
        else:
            scores = scores.copy()
        for row, times in self.later:
            scores += self.index._row_scores(row, positions) * np.float32(times)
        return top(scores, k, positions)


def _found(scores: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """Where the scores are positive (and allowed): the passages the terms read are in."""
    return np.flatnonzero(scores > 0 if allowed is None else (scores > 0) & allowed)


def _best(scores: np.ndarray, k: int) -> np.ndarray:
    """Where the `k` highest scores are (0 < k < len(scores)), in no order."""
    return np.argpartition(scores, len(scores) - k)[len(scores) - k :]  # (no negated copy of the scores)


def top(scores: np.ndarray | None, k: int, positions: np.ndarray | None = None) -> list[tuple[int, float]]:
    """(position, score) of the best `k` positive scores, best first (of equal scores the first by
    position; which of them make the cut is the partition's); `positions`: the passages the scores are
    of (None: the scores are every passage's, by position)."""
    if scores is None or k <= 0 or not len(scores):
        return []
    best = _best(scores, k) if k < len(scores) else range(len(scores))
    at = positions if positions is not None else range(len(scores))
    hits = ((int(at[i]), float(scores[i])) for i in best if scores[i] > 0)
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))
