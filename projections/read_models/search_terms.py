"""Search terms that work for Chinese: CJK runs become overlapping character bigrams.

SQLite's `trigram` tokenizer cannot match two-character words (天气), and `unicode61` treats a whole
CJK run as one token. Indexing bigrams and querying phrases of bigrams matches any substring of two
or more CJK characters; other scripts keep unicode61's word tokens.
"""

from __future__ import annotations

import re

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_RUNS = re.compile(rf"([{_CJK}]+)|[^\W{_CJK}]+", re.UNICODE)


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else list(map(str.__add__, run, run[1:]))


def index_terms(text: str) -> str:
    """The text as space-separated terms for an FTS5 `unicode61` column."""
    terms: list[str] = []
    for match in _RUNS.finditer(text):
        if match.group(1) is None:
            terms.append(match.group().lower())
        else:
            terms.extend(_bigrams(match.group()))
    return " ".join(terms)


def story_term(story_id: str) -> str:
    """A term every indexed text of one story carries, so a search matches inside that story only
    (instead of matching across every tenant's texts and filtering afterwards)."""
    return "zzstory" + story_id.replace("-", "")


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression (all parts must match), or None when only a substring scan can answer.

    A lone CJK character has no bigram to look for, so such queries return None.
    """
    parts: list[str] = []
    for match in _RUNS.finditer(query):
        run = match.group()
        if match.group(1) is None:
            parts.append('"' + run.lower().replace('"', "") + '"')
        elif len(run) == 1:
            return None
        else:
            parts.append('"' + " ".join(_bigrams(run)) + '"')
    return " ".join(parts) or None
