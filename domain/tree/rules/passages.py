"""Passages for recall: a text cut at sentence boundaries into pieces of at most `limit` characters.

Nothing is lost or added: the passages are consecutive slices of the text, stripped of the
whitespace at their ends. A sentence longer than the limit is cut at the limit. Pure functions.
"""

from __future__ import annotations

import re

PASSAGE_CHARS = 600
_SENTENCE_END = re.compile(r"[。！？!?…；;]+[”」』\"')）]*|\.+[\"')]*(?=\s|$)|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The text as consecutive (start, end) sentences, each with its closing punctuation and the
    space after it."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        while end < len(text) and text[end] in " \t":
            end += 1
        if end > start:
            spans.append((start, end))
        start = end
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def passage_spans(text: str, limit: int = PASSAGE_CHARS) -> list[tuple[int, int]]:
    """Whole sentences packed into (start, end) slices of at most `limit` characters (their ends
    stripped of whitespace), in order; slices of whitespace only are left out."""
    if len(text) <= limit:  # (most turns): one passage, whatever its sentences
        start, end = _strip(text, 0, len(text))
        return [(start, end)] if end > start else []
    out: list[tuple[int, int]] = []
    start = end = 0
    for s, e in sentence_spans(text):
        if _stripped_len(text, start, e) <= limit:
            end = e
            continue
        out.append((start, end))
        start, end = s, e
        while _stripped_len(text, start, end) > limit:  # one sentence longer than a passage: cut where it must
            out.append((start, start + limit))
            start += limit
    out.append((start, end))
    return [span for span in map(lambda span: _strip(text, *span), out) if span[1] > span[0]]


def cut_passages(text: str, limit: int = PASSAGE_CHARS) -> list[str]:
    """The passages' texts."""
    return [text[start:end] for start, end in passage_spans(text, limit)]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _stripped_len(text: str, start: int, end: int) -> int:
    s, e = _strip(text, start, end)
    return e - s
