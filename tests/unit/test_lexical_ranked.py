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
def test_too_few_passages_found_reads_on_to_the_exact_ranking(
    passages: list[list[str]], query: list[str], k: int
) -> None:
    """Fewer passages than the cut rescores (`RESCORED_MIN`) by the rarer terms: the next ones are read
    too, here to the end — the ranking is the exact one."""
    index = _index(passages)
    ranking = index.ranked(query, exact_postings=1)
    if index.scored(query) is None:
        assert ranking is None
        return
    assert ranking is not None and ranking.exact
    assert np.allclose([s for _, s in ranking.top(k)], [s for _, s in top(index.scored(query), k)], rtol=1e-5)


def _archive(size: int, rare_every: int, seed: int = 7) -> tuple[LexicalIndex, list[str]]:
    """`size` passages of 8 of 20 common words; one in `rare_every` holds "lantern" too, and one of
    those the whole query."""
    rng = np.random.default_rng(seed)
    common = [f"w{i}" for i in range(20)]
    passages = [list(rng.choice(common, 8)) for _ in range(size)]
    for i in range(0, size, rare_every):
        passages[i] = ["lantern", *passages[i][:7]]
    query = ["lantern", "harbour", *common[:6]]
    passages[rare_every * 3] = list(query)
    return _index(passages), query


def test_past_the_share_the_rarer_terms_find_and_every_score_is_exact() -> None:
    index, query = _archive(3_000, 10)  # (300 passages hold the rarer words: more than the cut rescores)
    allowed = np.arange(3_000) % 3 != 1  # (a third left out, as the verbatim window and other branches are)
    exact = index.scored(query, allowed)
    ranking = index.ranked(query, allowed, exact_postings=400)
    assert exact is not None and ranking is not None and not ranking.exact
    holding = {i for i in range(0, 3_000, 10)} | {30}
    got = ranking.top(10)
    assert len(got) == 10 and all(allowed[p] and p in holding for p, _ in got)
    assert all(np.isclose(score, exact[p], rtol=1e-5) for p, score in got)  # (every term's score)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    assert got[0][0] == 30 == _exact_top(index, query, 1, allowed)[0]  # (the passage with every word)
    fewer = index.ranked(query, allowed, exact_postings=1, least=1)  # ("harbour", in one passage, is enough)
    assert fewer is not None and fewer.postings == 1 and len(fewer.later) == len(set(query)) - 1
    (only, score), *rest = fewer.top(10)  # (the one passage found, scored by every word)
    assert only == 30 and not rest and np.isclose(score, got[0][1], rtol=1e-5)


def test_a_long_archive_reads_the_same_share_of_postings() -> None:
    """The postings read over every passage stop growing with the archive once the share is full: a
    query's cost is bounded, and the best passage is still the exact ranking's."""
    read = {}
    for size in (2_000, 20_000):
        index, query = _archive(size, 50)
        ranking = index.ranked(query, exact_postings=5_000)
        assert ranking is not None
        read[size] = ranking.postings
        got = ranking.top(3)
        assert got[0][0] == 150 == _exact_top(index, query, 1)[0]
        assert np.isclose(top(index.scored(query), 1)[0][1], got[0][1], rtol=1e-5)
    assert read[2_000] > 2_000 and read[20_000] <= 5_000  # (the small one found too few: read whole, exact)


def test_rarer_terms_found_only_where_nothing_is_allowed_read_on() -> None:
    """The rarest word only in passages left out (the verbatim window): the ranking reads on, and the
    allowed passages the other words are in are found."""
    index, query = _archive(3_000, 10)
    allowed = np.ones(3_000, dtype=bool)
    allowed[[i for i in range(0, 3_000, 10)] + [30]] = False  # every passage holding "lantern"
    ranking = index.ranked(query, allowed, exact_postings=400)
    assert ranking is not None and ranking.postings > 400
    got = ranking.top(10)
    assert len(got) == 10 and all(allowed[p] for p, _ in got)
    exact = index.scored(query, allowed)
    assert exact is not None and all(np.isclose(score, exact[p], rtol=1e-5) for p, score in got)


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
