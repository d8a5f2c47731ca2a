"""A search's bounded share of postings (`LexicalIndex.ranked`): exact BM25 wherever the query's postings
fit the share; beyond it, the rarest terms read over every passage and the commoner ones scoring the best
of those, every reported score still the passage's exact BM25 score."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.recall.lexical import LexicalIndex, top

WORDS = st.sampled_from(["fog", "ferry", "lamp", "mira", "harbour", "reef", "rope", "night", "雾", "渡船", "灯"])
PASSAGE = st.lists(WORDS, max_size=12)


def _index(passages: list[list[str]]) -> LexicalIndex:
    return LexicalIndex([" ".join(words) + f" #{i}" for i, words in enumerate(passages)], passages)


def _exact_top(index: LexicalIndex, query: list[str], k: int, allowed: np.ndarray | None = None) -> list[int]:
    """The exact ranking's best `k` positions, ties by position (as `Ranked.top` orders them)."""
    scores = index.scored(query, allowed)
    if scores is None:
        return []
    ranked = sorted((p for p in range(len(scores)) if scores[p] > 0), key=lambda p: (-scores[p], p))
    return ranked[:k]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(PASSAGE, min_size=1, max_size=30),
    st.lists(WORDS, min_size=1, max_size=5),
    st.integers(1, 12),
    st.data(),
)
def test_within_the_share_the_cut_is_exact_bm25(
    passages: list[list[str]], query: list[str], k: int, data: st.DataObject
) -> None:
    index = _index(passages)
    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=len(passages), max_size=len(passages))))
    ranking = index.ranked(query, allowed)
    expected = _exact_top(index, query, k, allowed)
    if index.scored(query) is None:
        assert ranking is None
        return
    assert ranking is not None and ranking.exact
    got = ranking.top(k)
    exact = index.scored(query, allowed)
    assert exact is not None and all(np.isclose(score, exact[p], rtol=1e-5) for p, score in got)
    assert np.allclose([s for _, s in got], [exact[p] for p in expected], rtol=1e-5)  # (ties at the cut: any)
    assert got == sorted(got, key=lambda hit: (-hit[1], hit[0])) and all(allowed[p] for p, _ in got)
    assert [p for p, _ in got][: _untied(exact, expected)] == expected[: _untied(exact, expected)]


def _untied(scores: np.ndarray, best: list[int]) -> int:
    """How many of `best` (in order) score above the last one's score: those are the same in every cut."""
    return sum(scores[p] > scores[best[-1]] + 1e-6 for p in best) if best else 0


@settings(max_examples=150, deadline=None)
@given(st.lists(PASSAGE, min_size=1, max_size=40), st.lists(WORDS, min_size=2, max_size=6), st.integers(1, 8))
def test_past_the_share_rarer_terms_find_and_every_score_is_exact(
    passages: list[list[str]], query: list[str], k: int
) -> None:
    index = _index(passages)
    ranking = index.ranked(query, exact_postings=1)  # (only the rarest term is read over every passage)
    exact = index.scored(query)
    if exact is None:
        assert ranking is None
        return
    assert ranking is not None
    asked = list(dict.fromkeys(index._rows(query)))  # (in the query's order: of two alike, the first)
    rows = sorted(asked, key=lambda r: index._indptr[r + 1] - index._indptr[r])
    rarest = rows[0]
    assert ranking.postings == index._indptr[rarest + 1] - index._indptr[rarest]
    assert ranking.exact == (len(rows) == 1)
    holding = set(index._docs[index._indptr[rarest] : index._indptr[rarest + 1]].tolist())
    got = ranking.top(k)
    assert got and {p for p, _ in got} <= holding  # (found by the rarest term)
    assert all(np.isclose(score, exact[p], rtol=1e-5) for p, score in got)  # (scored by every term)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    best_holding = sorted(holding, key=lambda p: (-exact[p], p))[: len(got)]
    assert np.allclose(sorted((s for _, s in got), reverse=True), [exact[p] for p in best_holding], rtol=1e-5)


def test_a_long_archive_reads_the_same_share_of_postings() -> None:
    """The postings read over every passage stop growing with the archive once the share is full: a
    query's cost is bounded, and the best passages are still the exact ranking's."""
    rng = np.random.default_rng(7)
    common = [f"w{i}" for i in range(20)]
    read = {}
    for size in (2_000, 20_000):
        passages = [list(rng.choice(common, 8)) for _ in range(size)]
        passages[size // 2] = ["lantern", "harbour", *common[:6]]  # the one passage with the rare words
        passages[size // 3] = ["harbour", *common[:7]]
        index = _index(passages)
        query = ["lantern", "harbour", *common[:6]]
        ranking = index.ranked(query, exact_postings=5_000)
        assert ranking is not None
        read[size] = ranking.postings
        got = ranking.top(3)
        assert got[0][0] == size // 2 and got[0][0] == _exact_top(index, query, 1)[0]
        assert top(index.scored(query), 1)[0][1] == np.float32(got[0][1])
    assert read[2_000] > 2_000 and read[20_000] <= 5_000  # (the small archive read whole: exact)


def test_a_term_asked_twice_counts_twice_whether_read_first_or_later() -> None:
    passages = [["fog", "lamp"], ["lamp"], ["fog"], ["reef", "lamp", "lamp"], ["fog", "fog", "reef"]]
    index = _index(passages)
    query = ["lamp", "lamp", "reef"]
    exact = index.scored(query)
    assert exact is not None
    for share in (1, 10**6):
        ranking = index.ranked(query, exact_postings=share)
        assert ranking is not None
        got = dict(ranking.top(5))
        assert all(np.isclose(score, exact[p], rtol=1e-5) for p, score in got.items())
    whole = index.ranked(query)
    assert whole is not None and [p for p, _ in whole.top(5)] == _exact_top(index, query, 5)
