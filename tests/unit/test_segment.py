"""CJK search terms: bigrams make two-character Chinese words findable."""

from __future__ import annotations

import pytest

from projections.read_models.search_terms import index_terms, match_expression


@pytest.mark.parametrize(("text", "word"), [("今天天气很好", "天气"), ("灯塔的旧日志", "日志"), ("船票", "船票")])
def test_index_terms_contain_two_character_words(text: str, word: str) -> None:
    assert word in index_terms(text).split()


def test_match_expression_is_a_phrase_of_bigrams_for_longer_words() -> None:
    assert match_expression("天气很好") == '"天气 气很 很好"'


def test_match_expression_is_none_for_a_single_cjk_character() -> None:
    assert match_expression("天") is None


@pytest.mark.parametrize(("text", "terms"), [("Hello World", "hello world"), ("GPS定位", "gps 定位")])
def test_index_terms_lowercase_non_cjk_words(text: str, terms: str) -> None:
    assert index_terms(text) == terms


def test_match_expression_lowercases_english_words() -> None:
    assert match_expression("Lighthouse") == '"lighthouse"'
