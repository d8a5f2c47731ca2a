"""The archive: every finished turn of every story as passages for recall (a read model, rebuilt from
events like the others).

A turn is the user's words and the reply that answered them, as one text (`words` + newline + `reply`)
cut into passages of at most 600 characters at sentence boundaries. Each passage row keeps the reply's
node (its key in the tree), the user's node, the reply's depth and turn, how many of its leading
characters are the user's words, and whether either node is hidden (hidden passages stay recallable:
hidden means out of the window, not forgotten). A revised reply replaces its passages by its new text;
a reply that never finished has none. `seq` is the position of the row's last change, so an index over
a story knows whether it is behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlite_utils

from domain.rules.passages import passage_spans

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Turn:
    """What the archive needs of a finished turn."""

    story_id: str
    user_id: str
    reply_id: str
    words: str
    reply: str
    depth: int
    turn: int
    user_hidden: bool
    reply_hidden: bool


def turn_passages(turn: Turn, seq: int) -> list[Row]:
    text = f"{turn.words}\n{turn.reply}"
    split = len(turn.words)
    return [
        {
            "id": f"{turn.reply_id}:{i}", "story_id": turn.story_id, "node_id": turn.reply_id,
            "user_id": turn.user_id, "depth": turn.depth, "turn": turn.turn, "text": text[start:end],
            "user_part": max(0, min(end, split) - start), "user_hidden": int(turn.user_hidden),
            "reply_hidden": int(turn.reply_hidden), "seq": seq,
        }
        for i, (start, end) in enumerate(passage_spans(text))
    ]  # fmt: skip


@dataclass
class ArchiveChanges:
    """What a batch of events does to the archive, applied in order after the other tables."""

    replaced: dict[str, list[Row]]  # reply node → its passages now
    flags: list[tuple[str, str, int, int]]  # (column, node id, value, seq), in event order
    dropped_stories: list[str]

    @classmethod
    def empty(cls) -> ArchiveChanges:
        return cls({}, [], [])

    def write(self, db: sqlite_utils.Database) -> None:
        conn = db.conn
        if self.replaced:
            conn.executemany("delete from passages where node_id = ?", [(node,) for node in self.replaced])
            rows = [row for rows in self.replaced.values() for row in rows]
            if rows:
                columns = list(rows[0])
                conn.executemany(
                    f"insert into passages ({', '.join(columns)}) values ({', '.join('?' for _ in columns)})",
                    [tuple(row[c] for c in columns) for row in rows],
                )
        for column, node_id, value, seq in self.flags:
            key = "node_id" if column == "reply_hidden" else "user_id"
            conn.execute(  # max: a flag folded after a newer replacement (one batch) keeps the newer seq
                f"update passages set {column} = ?, seq = max(seq, ?) where {key} = ?", [value, seq, node_id]
            )
        for story_id in self.dropped_stories:
            conn.execute("delete from passages where story_id = ?", [story_id])


def create(db: sqlite_utils.Database) -> None:
    """The table has no rowid: a passage is its id (rows are replaced, so a rowid would only record the
    order of the replacements, which a rebuild does not repeat)."""
    db.execute(
        "create table if not exists passages (id text primary key, story_id text, node_id text, user_id text,"
        " depth integer, turn integer, text text, user_part integer, user_hidden integer, reply_hidden integer,"
        " seq integer) without rowid"
    )
    db.table("passages").create_index(["story_id", "seq"], if_not_exists=True)
    db.table("passages").create_index(["node_id"], if_not_exists=True)
    db.table("passages").create_index(["user_id"], if_not_exists=True)
