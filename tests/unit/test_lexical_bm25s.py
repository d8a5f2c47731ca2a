"""changji's BM25 gives the scores bm25s gives (its Lucene variant, k1 1.5, b 0.75) for the same passages
and queries — built whole or with a vocabulary shared with earlier builds."""

from __future__ import annotations

import bm25s
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.recall.lexical import EMPTY, LexicalIndex, Vocabulary

WORDS = st.sampled_from(["fog", "ferry", "lamp", "mira", "harbour", "reef", "rope", "night", "雾", "渡船", "灯"])
PASSAGE = st.lists(WORDS, max_size=12)


def reference(passages: list[list[str]], query: list[str]) -> np.ndarray | None:
    index = bm25s.BM25()
    index.index([words or [EMPTY] for words in passages], show_progress=False)
    known = [t for t in query if t in index.vocab_dict]
    return index.get_scores(known) if known else None


@settings(max_examples=150, deadline=None)
@given(st.lists(PASSAGE, min_size=1, max_size=30), st.lists(WORDS, min_size=1, max_size=4), st.data())
def test_the_scores_are_bm25s_scores(passages: list[list[str]], query: list[str], data: st.DataObject) -> None:
    texts = [" ".join(words) + f" #{i}" for i, words in enumerate(passages)]  # (one text a passage)
    expected = reference(passages, query)
    ours = LexicalIndex(texts, passages).scored(query)
    if expected is None:
        assert ours is None
    else:
        assert ours is not None and np.allclose(ours, expected, rtol=1e-6, atol=1e-7)
    shared = Vocabulary()  # the same, built after an earlier build counted some of the passages
    earlier = data.draw(st.integers(0, len(passages)))
    LexicalIndex([*texts[:earlier], "lamp reef other"], [*passages[:earlier], ["lamp", "reef", "other"]], shared)
    again = LexicalIndex(texts, passages, shared).scored(query)
    assert (again is None) == (expected is None)
    if expected is not None:
        assert again is not None and np.allclose(again, expected, rtol=1e-6, atol=1e-7)


def test_a_vocabulary_given_is_the_one_built_with_and_counts_a_passage_once() -> None:
    shared = Vocabulary()  # (empty at first: given all the same)
    first = LexicalIndex(["fog over the ferry", "the lamp"], None, shared)
    assert first.vocabulary is shared and len(shared) > 0
    counted = dict(shared._counted)
    LexicalIndex(["fog over the ferry", "the lamp", "a reef"], None, shared)
    assert all(shared._counted[text] is record for text, record in counted.items())  # read, not counted again
