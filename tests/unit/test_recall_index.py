"""The recall indexes: lexical terms, BM25, dense vectors, reciprocal rank fusion, offline embedders."""

from __future__ import annotations

import numpy as np
import pytest

from projections.recall.fusion import fuse
from projections.recall.lexical import LexicalIndex
from projections.recall.terms import lexical_terms
from projections.recall.vectors import VectorIndex
from providers.embedders import HashingEmbedder

PASSAGES = [
    "林舟：渡船什么时候来？\n沈砚：三天后，等风停。",
    "林舟：灯塔的灯为什么熄了？\n沈砚：油用完了，得去镇上买。",
    "Caroline: I went to the LGBTQ support group yesterday.",
    "Melanie: We painted a sunrise over the lake.",
]


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Running to the support groups!", ["run", "support", "group"]),
        ("渡船什么时候来", ["渡船", "什么", "时候", "来"]),
        ("When did she go?", ["go"]),
        ("", []),
    ],
)
def test_lexical_terms_segment_chinese_and_stem_english(text: str, terms: list[str]) -> None:
    assert lexical_terms(text) == terms


def test_bm25_ranks_the_passage_sharing_the_query_words_first() -> None:
    index = LexicalIndex(PASSAGES)
    assert index.search("灯塔为什么熄灭了", 2)[0][0] == 1
    assert index.search("When did Caroline go to the support group?", 4)[0][0] == 2
    assert index.search("完全无关的字眼 zzz", 4) == []


def test_bm25_search_leaves_masked_passages_out() -> None:
    index = LexicalIndex(PASSAGES)
    allowed = np.array([1, 0, 1, 1], dtype=np.float32)
    assert all(position != 1 for position, _ in index.search("灯塔为什么熄灭了", 4, allowed))


def test_vector_search_is_exact_and_respects_the_mask() -> None:
    embedder = HashingEmbedder()
    index = VectorIndex(embedder.dimensions)
    index.add(embedder.encode(PASSAGES))
    query = embedder.encode(["渡船什么时候来"], "query")[0]
    hits = index.search(query, 4)
    assert hits[0][0] == 0 and hits[0][1] == pytest.approx(max(s for _, s in hits))
    masked = index.search(query, 4, np.array([0, 1, 1, 1], dtype=np.float32))
    assert masked and all(position != 0 for position, _ in masked)
    assert index.search(query, 4, np.zeros(4, dtype=np.float32)) == []


def test_hashing_vectors_are_unit_length_and_the_same_in_every_process() -> None:
    vectors = HashingEmbedder(256).encode(["灯塔", "the lighthouse", ""])
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0) and not vectors[2].any()
    assert float(vectors[0] @ HashingEmbedder(256).encode(["灯塔"])[0]) == pytest.approx(1.0)


def test_fusion_favours_passages_both_retrievers_found_and_says_who_found_them() -> None:
    fused = fuse({"bm25": [(7, 9.0), (3, 5.0)], "dense": [(3, 0.8), (9, 0.7)]})
    assert [hit.position for hit in fused] == [3, 7, 9]
    assert fused[0].found_by == {"bm25": (2, 5.0), "dense": (1, 0.8)}


def test_fusion_weights_a_retriever_down() -> None:
    fused = fuse({"bm25": [(1, 1.0)], "dense": [(2, 1.0)]}, weights={"bm25": 1.0, "dense": 0.5})
    assert [hit.position for hit in fused] == [1, 2]
