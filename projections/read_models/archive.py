"""The archive: every finished turn of every story as passages for recall (a read model, rebuilt from
events like the others).

A turn is the user's words and the reply that answered them, as one text (`words` + newline + `reply`)
cut into passages of at most 600 characters at sentence boundaries. Each passage row keeps the reply's
node (its key in the tree), the user's node, the reply's depth and turn, how many of its leading
characters are the user's words, and whether either node is hidden (hidden passages stay recallable:
hidden means out of the window, not forgotten). A revised reply replaces its passages by its new text;
a reply that never finished has none.

Every episode summary is archived too (`kind` "episode"; a turn's rows are "turn"): its text cut the same
way, keyed by the node it annotates (`node_id`, the last node it covers) and the first node it covers
(`user_id`), so "both on the path" means its whole span is; `first_turn`–`turn` are the turns it
covers, and a user's edit replaces its text. `seq` is the position of the row's last change, so an
index over a story knows whether it is behind. A deleted story's rows stay (it can be restored, and
work that ends after the delete, such as a summary, lands too); `ReadModels.passages` and
`archive_seq` do not serve them while it is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlite_utils

from domain.tree.rules.passages import passage_spans

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
            "reply_hidden": int(turn.reply_hidden), "seq": seq, "kind": "turn", "first_turn": turn.turn,
        }
        for i, (start, end) in enumerate(passage_spans(text))
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Summary:
    """What the archive needs of an episode summary."""

    story_id: str
    episode_id: str
    node_id: str  # the node it annotates: the last it covers
    start_id: str  # the first node it covers
    depth: int
    first_turn: int
    last_turn: int
    text: str


def episode_passages(summary: Summary, seq: int) -> list[Row]:
    return [
        {
            "id": f"{summary.episode_id}:{i}", "story_id": summary.story_id, "node_id": summary.node_id,
            "user_id": summary.start_id, "depth": summary.depth, "turn": summary.last_turn,
            "text": summary.text[start:end], "user_part": 0, "user_hidden": 0, "reply_hidden": 0, "seq": seq,
            "kind": "episode", "first_turn": summary.first_turn,
        }
        for i, (start, end) in enumerate(passage_spans(summary.text))
    ]  # fmt: skip


@dataclass
class ArchiveChanges:
    """What a batch of events does to the archive, applied in order after the other tables."""

    replaced: dict[str, list[Row]]  # reply node → its turn passages now
    episodes: dict[str, list[Row]]  # annotated node → its episode passages now
    edited: dict[str, tuple[str, int]]  # annotated node → (its episode's new text, seq), summarized earlier
    flags: list[tuple[str, str, int, int]]  # (column, node id, value, seq), in event order

    @classmethod
    def empty(cls) -> ArchiveChanges:
        return cls({}, {}, {}, [])

    def write(self, db: sqlite_utils.Database) -> None:
        conn = db.conn
        for node_id, (text, seq) in self.edited.items():
            first = conn.execute(
                "select story_id, id, user_id, depth, first_turn, turn from passages"
                " where node_id = ? and kind = 'episode' order by id limit 1",
                [node_id],
            ).fetchone()
            if first is not None:  # (an episode summarized before the archive kept episodes has none)
                story_id, passage_id, start_id, depth, first_turn, last_turn = first
                summary = Summary(
                    story_id, passage_id.rsplit(":", 1)[0], node_id, start_id, depth, first_turn, last_turn, text
                )
                self.episodes.setdefault(node_id, episode_passages(summary, seq))
        for kind, changed in (("turn", self.replaced), ("episode", self.episodes)):
            if not changed:
                continue
            conn.executemany("delete from passages where node_id = ? and kind = ?", [(node, kind) for node in changed])
            rows = [row for rows in changed.values() for row in rows]
            if rows:
                columns = list(rows[0])
                conn.executemany(
                    f"insert into passages ({', '.join(columns)}) values ({', '.join('?' for _ in columns)})",
                    [tuple(row[c] for c in columns) for row in rows],
                )
        for column, node_id, value, seq in self.flags:
            key = "node_id" if column == "reply_hidden" else "user_id"
            conn.execute(  # max: a flag folded after a newer replacement (one batch) keeps the newer seq
                f"update passages set {column} = ?, seq = max(seq, ?) where {key} = ? and kind = 'turn'",
                [value, seq, node_id],
            )


def create(db: sqlite_utils.Database) -> None:
    """The table has no rowid: a passage is its id (rows are replaced, so a rowid would only record the
    order of the replacements, which a rebuild does not repeat)."""
    db.execute(
        "create table if not exists passages (id text primary key, story_id text, node_id text, user_id text,"
        " depth integer, turn integer, text text, user_part integer, user_hidden integer, reply_hidden integer,"
        " seq integer, kind text, first_turn integer) without rowid"
    )
    db.table("passages").create_index(["story_id", "seq"], if_not_exists=True)
    db.table("passages").create_index(["node_id"], if_not_exists=True)
    db.table("passages").create_index(["user_id"], if_not_exists=True)
