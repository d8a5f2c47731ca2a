"""Lexical terms for BM25: Chinese runs segmented into words (jieba's dictionary and search mode, by
`rjieba`, the binding of jieba-rs: the same words as the `jieba` package on all 5,705 Chinese runs of
the MemoryBank chats, at a tenth of the time, and no dictionary to load at the first call), other
scripts split into lowercase words and stemmed (Snowball, when PyStemmer is installed); stopwords
and punctuation dropped."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import rjieba
from bm25s.stopwords import STOPWORDS_EN_PLUS

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUNS = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}_]+(?:'[^\W{_CJK}_]+)?)", re.UNICODE)
_STOP_EN = frozenset(w.replace("'", "") for w in STOPWORDS_EN_PLUS)
_STOP_ZH = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "我",
        "你",
        "他",
        "她",
        "它",
        "们",
        "这",
        "那",
        "和",
        "就",
        "也",
        "都",
        "而",
        "及",
        "与",
        "着",
        "吗",
        "呢",
        "吧",
        "啊",
        "呀",
        "哦",
        "嗯",
    ]
)


@cache
def _stemmer() -> Any:
    try:
        import Stemmer
    except ImportError:  # optional: terms are then unstemmed words
        return None
    return Stemmer.Stemmer("english")


def lexical_terms(text: str) -> list[str]:
    """The text's index terms, in order (duplicates kept: BM25 counts them)."""
    terms: list[str] = []
    words: list[str] = []
    for match in _RUNS.finditer(text):
        if match.group(1) is not None:
            terms.extend(w for w in rjieba.cut_for_search(match.group(1), True) if w not in _STOP_ZH)
        else:
            word = match.group(2).lower()
            if word not in _STOP_EN:
                words.append(word.replace("'", ""))
    stemmer = _stemmer()
    if words:
        terms.extend(stemmer.stemWords(words) if stemmer is not None else words)
    return terms
