"""What the dense retriever embeds for a passage: the end of the passage before it on its path, then
the passage. A turn read alone often lacks what it answers or who it is about ("yes, last Tuesday");
the lines just before it carry that. BM25 still scores the passage alone, so a word of the previous
turn never makes a passage match by itself.

Measured on LoCoMo (`ops/bench/locomo_recall.py`, BM25 + e5 over turn passages; chosen on conv-26 and
conv-30, 300 characters of the passage before): recall@5 / @10 over all ten conversations in the README.
The following passage as well did not help."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CONTEXT_CHARS = 300  # of the previous passage, from its end


def with_previous(texts: Sequence[str], previous: Sequence[int | None]) -> list[str]:
    """Each text preceded by the last CONTEXT_CHARS of the text at `previous[i]` (None: as it is)."""
    return [
        text if before is None else f"{texts[before][-CONTEXT_CHARS:]}\n{text}"
        for text, before in zip(texts, previous, strict=True)
    ]


def previous_passages(rows: Sequence[Mapping[str, Any]], parent_of: Mapping[str, str]) -> list[int | None]:
    """For archive rows (`projections/read_models/archive.py`: id `<reply>:<part>`, `node_id` the reply,
    `user_id` the user's node), the row of the passage before each on its path: the previous part of
    the same turn, else the last part of the turn whose reply is the user node's parent."""
    where = {row["id"]: i for i, row in enumerate(rows)}
    last_part: dict[str, tuple[int, int]] = {}  # reply node → (part, row) of its last passage
    for i, row in enumerate(rows):
        part = int(str(row["id"]).rsplit(":", 1)[1])
        if part >= last_part.get(row["node_id"], (-1, -1))[0]:
            last_part[row["node_id"]] = (part, i)
    out: list[int | None] = []
    for row in rows:
        reply, number = str(row["id"]).rsplit(":", 1)
        if int(number) > 0:
            out.append(where.get(f"{reply}:{int(number) - 1}"))
        else:
            parent = parent_of.get(row["user_id"])
            out.append(last_part[parent][1] if parent in last_part else None)
    return out
