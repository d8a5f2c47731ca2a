"""One story's archive, indexed: BM25 over every passage, BM25 over each passage after the end of the
one before it, and, with an embedder, their dense vectors (of the passages in context too). Measured on
LoCoMo (`ops/bench/locomo_recall.py`), the second BM25 ranking adds 2–4 points to the fusion.

An index is built whole from the archive rows as of `seq` and never changed; a newer one replaces it.
`search` looks only at passages older than the verbatim window (`before_depth`) whose nodes are on
the current path (`on_path`), and at episode summaries not already in the context (`shown_episodes`),
fuses the two rankings and returns the best `k`, best first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from projections.recall.fusion import fuse
from projections.recall.lexical import LexicalIndex, Vocabulary
from projections.recall.terms import lexical_terms
from projections.recall.vectors import VectorIndex

CANDIDATES = 40  # each retriever's list before the path filter and the fusion
MAX_CANDIDATES = 2560  # how deep a list is read at most when other branches crowd the path's passages out


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled passage, with the fused score and each retriever's (rank, score)."""

    row: dict[str, Any]
    score: float
    found_by: dict[str, tuple[int, float]] = field(default_factory=dict)
    whole: dict[str, Any] | None = None  # a turn cut into several passages: the whole turn, as one row

    @property
    def hidden(self) -> bool:
        return bool(self.row["user_hidden"] or self.row["reply_hidden"])

    @property
    def episode(self) -> bool:
        """An episode summary's passage (else a turn's)."""
        return self.row.get("kind") == "episode"

    @property
    def story_order(self) -> tuple[int, int, int]:
        """Where the passage sits in the story: its node's depth, a turn before the episode summary that
        ends on the same node, then its part (ids `<key>:<part>`, parts compared as numbers)."""
        return (int(self.row["depth"]), int(self.episode), int(str(self.row["id"]).rsplit(":", 1)[1]))


class StoryIndex:
    def __init__(
        self,
        seq: int,
        rows: Sequence[dict[str, Any]],
        vectors: np.ndarray | None,
        terms: Sequence[list[str]] | None = None,
        complete: bool = True,
        in_context: Sequence[str] | None = None,
        in_context_terms: Sequence[list[str]] | None = None,
        vocabulary: Vocabulary | None = None,
    ) -> None:
        """`rows`: the story's archive rows; `vectors`: their embeddings, row for row (None: no dense
        retriever); `terms`: their lexical terms, if known; `complete`: False when vectors were wanted
        and could not be made (no dense retriever until it is built again); `in_context`: each passage
        after the end of the one before it (`projections/recall/dense_text.py`), for a second BM25
        ranking (`bm25_context`) beside the passage's own, with its terms if known; `vocabulary`: one
        shared with the story's earlier builds (`projections/recall/lexical.py`)."""
        self.seq, self.complete = seq, complete
        self.unfinished = False  # vectors were wanted and some are still to be made (a backlog, a share at a time)
        self.dense_count = len(vectors) if vectors is not None else 0  # passages with a vector made
        self.rows = list(rows)
        self.depths = np.array([row["depth"] for row in self.rows], dtype=np.int64)
        self.episode_rows: dict[str, list[int]] = {}  # annotated node → its episode's rows
        self.turn_rows: dict[str, list[int]] = {}  # a turn's reply node → its passages' rows (a long turn: several)
        for position, row in enumerate(self.rows):
            if row.get("kind") == "episode":
                self.episode_rows.setdefault(row["node_id"], []).append(position)
            else:
                self.turn_rows.setdefault(row["node_id"], []).append(position)
        self.episode_positions = np.array(sorted(p for ps in self.episode_rows.values() for p in ps), dtype=np.int64)
        vocabulary = vocabulary if vocabulary is not None else Vocabulary(2 * len(self.rows) + 1)
        self.lexical = LexicalIndex([row["text"] for row in self.rows], terms, vocabulary)
        self.lexical_context = (
            LexicalIndex(in_context, in_context_terms, vocabulary) if in_context is not None else None
        )
        self.vectors: VectorIndex | None = None
        if vectors is not None and len(self.rows):
            self.vectors = VectorIndex(vectors.shape[1])
            self.vectors.add(vectors)

    def search(
        self,
        query: str,
        query_vector: np.ndarray | None,
        k: int,
        before_depth: int,
        on_path: Callable[[str], bool],
        shown_episodes: Collection[str] | None = (),
        search: str | None = None,
        spare: int = 0,
    ) -> list[Hit]:
        """`shown_episodes`: nodes whose episode summary the context holds already (None: no episode
        summaries at all, turns only); `search`: the side model's search for the same words, ranked by
        words over the passages in context (or alone) and fused with the rest; `spare`: passages past the
        best `k` (those that come next, the best `k` ranked as ever)."""
        if not self.rows or k <= 0:
            return []
        allowed = self.depths < before_depth
        if shown_episodes is None:
            allowed[self.episode_positions] = False
        else:
            for node_id in shown_episodes:
                allowed[self.episode_rows.get(node_id, [])] = False
        if not allowed.any():
            return []
        terms = lexical_terms(query)  # the query read once, each index scored once: only the cut goes deeper
        lexical = self.lexical.ranked(terms, allowed)
        context = self.lexical_context.ranked(terms, allowed) if self.lexical_context is not None else None
        by_search = (self.lexical_context or self.lexical).ranked(lexical_terms(search), allowed) if search else None
        wanted = CANDIDATES
        while True:  # branches and regenerates share words: read deeper until enough are on the path
            read = {"bm25": lexical.top(wanted) if lexical else []}
            if self.lexical_context is not None:
                read["bm25_context"] = context.top(wanted) if context else []
            if search:
                read["search"] = by_search.top(wanted) if by_search else []
            if self.vectors is not None and query_vector is not None:
                read["dense"] = self.vectors.search(query_vector, wanted, allowed)
            rankings = {name: self._on_path(ranked, on_path) for name, ranked in read.items()}
            # a ranking is deep enough with k on the path, or when it has no more to give (a rare word's
            # passages are all read): only one the path filter cut short is read deeper
            short = [name for name in read if len(rankings[name]) < k and len(read[name]) >= wanted]
            if not short or wanted >= min(len(self.rows), MAX_CANDIDATES):
                break
            wanted *= 4
        fused = fuse(rankings)[: k + spare]
        return [Hit(self.rows[hit.position], hit.score, hit.found_by, self._whole(hit.position)) for hit in fused]

    def _whole(self, position: int) -> dict[str, Any] | None:
        """The whole turn a passage is part of, as one row (None: the turn is that one passage)."""
        row = self.rows[position]
        if row.get("kind") == "episode":
            return None
        parts = sorted(
            self.turn_rows.get(row["node_id"], ()), key=lambda p: int(str(self.rows[p]["id"]).rsplit(":", 1)[1])
        )
        if len(parts) < 2:
            return None
        text, split = "", 0
        for p in parts:  # (passages are cut at sentences, their ends stripped: a space back between words)
            part = str(self.rows[p]["text"])
            if text and text[-1:].isascii() and part[:1].isascii() and not text[-1:].isspace():
                text += " "
            if int(self.rows[p]["user_part"]):
                split = len(text) + int(self.rows[p]["user_part"])
            text += part
        return {**self.rows[parts[0]], "id": f"{row['node_id']}:0", "text": text, "user_part": split}

    def _on_path(self, ranked: list[tuple[int, float]], on_path: Callable[[str], bool]) -> list[tuple[int, float]]:
        rows = self.rows
        return [(p, s) for p, s in ranked if on_path(rows[p]["node_id"]) and on_path(rows[p]["user_id"])]
