"""Draft text rules: quote→replacement edit batches, reading and searching a draft. Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from domain.errors import DraftEditError

APPEND_SEPARATOR = "\n\n"  # what a draft_append joins its text with when the call names no separator

SEARCH_CONTEXT = 40


@dataclass(frozen=True, slots=True)
class Edit:
    old: str
    new: str


def parse_edits(raw: object) -> list[Edit]:
    """Edits as the model sends them: a list of {"old": …, "new": …}."""
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise DraftEditError(
            "edits must be a non-empty list of {old, new}", zh="`edits` 必须是由 {old, new} 组成的非空列表"
        )
    edits = []
    for i, item in enumerate(raw):
        if (
            not isinstance(item, Mapping)
            or not isinstance(item.get("old"), str)
            or not isinstance(item.get("new"), str)
        ):
            raise DraftEditError(
                f"edit {i + 1} must be {{old: string, new: string}}",
                zh=f"第 {i + 1} 处修改必须是 {{old: 字符串, new: 字符串}}",
            )
        if not item["old"]:
            raise DraftEditError(
                f"edit {i + 1} quotes nothing: `old` must be a passage of the current text",
                zh=f"第 {i + 1} 处修改没有引文：`old` 必须是当前文本中的一段",
            )
        edits.append(Edit(item["old"], item["new"]))
    return edits


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply every edit against the same text, or none: each quote must occur exactly once, and no two
    quotes may overlap."""
    spans: list[tuple[int, int, Edit]] = []
    for i, edit in enumerate(edits, 1):
        at = text.find(edit.old)
        if at < 0:
            raise DraftEditError(
                f"edit {i}: the quote was not found in the current text: “{edit.old[:60]}”",
                zh=f"第 {i} 处修改：当前文本中找不到这段引文：“{edit.old[:60]}”",
            )
        if text.find(edit.old, at + 1) >= 0:
            raise DraftEditError(
                f"edit {i}: the quote occurs more than once; quote more of it: “{edit.old[:60]}”",
                zh=f"第 {i} 处修改：这段引文出现了不止一次，请多引一些：“{edit.old[:60]}”",
            )
        spans.append((at, at + len(edit.old), edit))
    spans.sort(key=lambda span: span[0])
    for (_, end, _), (start, _, edit) in pairwise(spans):
        if start < end:
            raise DraftEditError(
                f"two edits overlap near “{edit.old[:40]}”; merge them into one",
                zh=f"有两处修改在“{edit.old[:40]}”附近重叠，请合并成一处",
            )
    out, last = [], 0
    for start, end, edit in spans:
        out.append(text[last:start])
        out.append(edit.new)
        last = end
    out.append(text[last:])
    return "".join(out)


def read_range(text: str, start: int | None, end: int | None) -> str:
    return text[start or 0 : end if end is not None else len(text)]


def search(text: str, query: str, limit: int) -> list[tuple[int, str]]:
    """(position, passage around it) for each occurrence of `query`, at most `limit`."""
    hits: list[tuple[int, str]] = []
    at = text.find(query) if query else -1
    while at >= 0 and len(hits) < limit:
        hits.append((at, text[max(at - SEARCH_CONTEXT, 0) : at + len(query) + SEARCH_CONTEXT]))
        at = text.find(query, at + 1)
    return hits
