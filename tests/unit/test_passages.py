"""Passages: texts cut at sentence boundaries, nothing lost or added, none longer than the limit."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.tree.rules.passages import cut_passages, passage_spans, sentence_spans


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("门被风撞开。“渡船三天后才到。”他说！", ["门被风撞开。", "“渡船三天后才到。”", "他说！"]),
        ("It rained. We stayed in; the fire was warm", ["It rained. ", "We stayed in; ", "the fire was warm"]),
        ("第一行\n第二行", ["第一行\n", "第二行"]),
        ("v1.2 is out", ["v1.2 is out"]),
    ],
)
def test_sentences_keep_their_punctuation_and_spacing(text: str, sentences: list[str]) -> None:
    assert [text[s:e] for s, e in sentence_spans(text)] == sentences
    assert "".join(text[s:e] for s, e in sentence_spans(text)) == text


def test_short_text_is_one_passage() -> None:
    assert cut_passages("  一句话。  ") == ["一句话。"]


def test_sentences_are_packed_up_to_the_limit() -> None:
    text = "甲" * 8 + "。" + "乙" * 8 + "。" + "丙" * 8 + "。"
    assert cut_passages(text, limit=20) == ["甲" * 8 + "。" + "乙" * 8 + "。", "丙" * 8 + "。"]


def test_a_sentence_longer_than_the_limit_is_cut_at_the_limit() -> None:
    assert cut_passages("短句。" + "长" * 25, limit=10) == ["短句。", "长" * 10, "长" * 10, "长" * 5]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="甲乙 ab.。！\n?", max_size=400), st.integers(5, 60))
def test_passages_are_the_text_in_order_and_within_the_limit(text: str, limit: int) -> None:
    spans = passage_spans(text, limit)
    assert all(0 < end - start <= limit for start, end in spans)
    assert all(a[1] <= b[0] for a, b in pairwise(spans))
    assert re.sub(r"\s", "", "".join(text[s:e] for s, e in spans)) == re.sub(r"\s", "", text)


def test_a_text_as_long_as_the_limit_is_one_passage_and_one_more_character_is_two() -> None:
    text = "甲。" * 5  # ten characters, five sentences
    assert cut_passages(text, limit=10) == [text]
    assert cut_passages(text + "乙", limit=10) == ["甲。" * 5, "乙"]
    assert cut_passages(" \n\t ", limit=10) == []
