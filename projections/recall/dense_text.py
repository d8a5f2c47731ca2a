"""What the dense retriever embeds for a passage: the end of the passage before it on its path, then
the passage. A turn read alone often lacks what it answers or who it is about ("yes, last Tuesday");
the lines just before it carry that. BM25 still scores the passage alone, so a word of the previous
turn never makes a passage match by itself.

Measured on LoCoMo (`ops/bench/locomo_recall.py`, BM25 + e5 over turn passages; chosen on conv-26 and
conv-30, 300 characters of the passage before): recall@5 / @10 over all ten conversations in the README.
The following passage as well did not help. Context never pushes a passage past one e5 window (512
tokens): a long Chinese passage gets less of it, or none."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

CONTEXT_CHARS = 300  # of the previous passage, from its end
TOKEN_ROOM = 480  # passage and context together, in estimated tokens: within one 512-token e5 window
PARENT_STEPS = 6  # how far up a turn looks for a reply with passages (past stopped replies)
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def _tokens(text: str) -> float:
    """A multilingual tokenizer's count, roughly: ¾ of a token per CJK character, ¼ per other one."""
    cjk = len(_CJK.findall(text))
    return 0.75 * cjk + 0.25 * (len(text) - cjk)


def _context(before: str, text: str) -> str:
    """The end of `before` that fits beside `text`: at most CONTEXT_CHARS, and all within TOKEN_ROOM."""
    room = TOKEN_ROOM - _tokens(text)
    tail = before[-CONTEXT_CHARS:]
    while tail and _tokens(tail) > room:
        tail = tail[max(1, len(tail) // 4) :]
    return tail


def with_previous(
    texts: Sequence[str],
    previous: Sequence[int | None],
    known: Mapping[tuple[str, str], str] | None = None,
    made: dict[tuple[str, str], str] | None = None,
) -> list[str]:
    """Each text preceded by the end of the text at `previous[i]` (None, or no room: as it is). `known`:
    (text, the text before it) → what was made of them before (an index rebuilt as its archive grows
    makes the same of most); `made`: where what is made of each pair is put."""
    out = []
    for text, before in zip(texts, previous, strict=True):
        if before is None:
            out.append(text)
            continue
        pair = (text, texts[before])
        joined = known.get(pair) if known is not None else None
        if joined is None:
            tail = _context(texts[before], text)
            joined = f"{tail}\n{text}" if tail else text
        if made is not None:
            made[pair] = joined
        out.append(joined)
    return out


def previous_passages(rows: Sequence[Mapping[str, Any]], parent_of: Mapping[str, str]) -> list[int | None]:
    """For archive rows (`projections/read_models/archive.py`: id `<reply>:<part>`, `node_id` the reply,
    `user_id` the user's node), the row of the passage before each on its path: the previous part of
    the same turn, else the last part of the nearest reply above the user's node that has passages (a
    stopped reply has none). An episode summary's passages are embedded as they are (None)."""
    where = {row["id"]: i for i, row in enumerate(rows)}
    last_part: dict[str, tuple[int, int]] = {}  # reply node → (part, row) of its last passage
    for i, row in enumerate(rows):
        if row.get("kind", "turn") != "turn":
            continue
        part = int(str(row["id"]).rsplit(":", 1)[1])
        if part >= last_part.get(row["node_id"], (-1, -1))[0]:
            last_part[row["node_id"]] = (part, i)
    out: list[int | None] = []
    for row in rows:
        if row.get("kind", "turn") != "turn":
            out.append(None)
            continue
        reply, number = str(row["id"]).rsplit(":", 1)
        if int(number) > 0:
            out.append(where.get(f"{reply}:{int(number) - 1}"))
            continue
        node = parent_of.get(row["user_id"])
        for _ in range(PARENT_STEPS):
            if node is None or node in last_part:
                break
            node = parent_of.get(node)
        out.append(last_part[node][1] if node in last_part else None)
    return out
