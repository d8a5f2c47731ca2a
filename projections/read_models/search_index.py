"""The full-text index of node texts (`node_texts_fts`), brought up to date from the texts' `seq`.

Each text row carries the position of its last change; the index keeps its own position (`search` in
`positions`) and indexes the rows changed since, oldest change first, a batch per transaction. One
indexer at a time: the read models' writer (`ReadModels.index_texts`), or, while a rebuild folds the
log, a process of its own beside the fold (`IndexerBeside`): working out the terms of every text is as
much work as the rest of a rebuild, and the fold then leaves it to the second core. Both write the
same file; SQLite's lock takes their transactions one at a time.

This module imports only what indexing needs, so the process starts quickly.
"""

from __future__ import annotations

import logging
import os
import select
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from projections.read_models.search_terms import index_terms, story_term

log = logging.getLogger(__name__)

SEARCH = "search"  # the position of the full-text index: the last node_texts.seq it holds
BESIDE_BATCH = 2000  # texts per transaction of the indexer beside a rebuild
BESIDE_PAUSE = 0.05  # seconds it waits for the fold to commit more texts


def index_texts(conn: sqlite3.Connection, limit: int) -> int:
    """Index up to `limit` texts changed since the index's position, oldest change first, in one
    transaction; return how many (fewer than `limit`: the index is up to date). `conn` autocommits
    (isolation_level None) and is the only indexer of its file."""
    rows = conn.execute(
        "select rowid, story_id, text, seq from node_texts where seq > ? order by seq limit ?",
        [search_position(conn), limit],
    ).fetchall()
    if not rows:
        return 0
    terms = [(rowid, f"{story_term(story_id)} {index_terms(text)}") for rowid, story_id, text, _ in rows]
    conn.execute("BEGIN IMMEDIATE")  # (the terms are worked out first: the lock is held for the writes alone)
    try:
        conn.executemany("delete from node_texts_fts where rowid = ?", [(r[0],) for r in rows])
        conn.executemany("insert into node_texts_fts (rowid, terms) values (?, ?)", terms)
        conn.execute(
            "insert into positions (name, position) values (?, ?)"
            " on conflict(name) do update set position = excluded.position",
            [SEARCH, rows[-1][3]],
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(rows)


def search_position(conn: sqlite3.Connection) -> int:
    row = conn.execute("select position from positions where name = ?", [SEARCH]).fetchone()
    return int(row[0]) if row else 0


def index_beside(path: str, done: Callable[[float], bool], batch: int = BESIDE_BATCH) -> int:
    """Index the texts of the read-model file at `path` as a fold commits them, until `done(pause)`
    (which may wait up to `pause` seconds for it) is true and every text committed before is indexed;
    return how many were indexed."""
    conn = sqlite3.connect(path, isolation_level=None)
    indexed = 0
    try:
        conn.execute("PRAGMA busy_timeout=60000")  # (the fold's transactions are large)
        finished = False
        while True:
            step = index_texts(conn, batch)
            indexed += step
            if step < batch:
                if finished:
                    return indexed
                finished = done(BESIDE_PAUSE)  # then once more: texts committed before it are all read
    finally:
        conn.close()


def _stdin_closed(pause: float) -> bool:
    """True once the parent closed this process's input (waiting up to `pause` seconds for it)."""
    readable, _, _ = select.select([sys.stdin], [], [], pause)
    return bool(readable) and not os.read(sys.stdin.fileno(), 1)


class IndexerBeside:
    """The full-text index of a read-model file built by a process of its own while the caller folds
    into that file (`python -m projections.read_models.search_index PATH`: it indexes until its input
    is closed, then prints how many texts it indexed). `finish()` once the last batch is committed,
    then `join()`: that count. A process that fails counts 0, and the caller's own indexing
    afterwards finds the texts it left."""

    def __init__(self, path: str) -> None:
        root = str(Path(__file__).resolve().parents[2])  # (where this package is, installed or not)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )

    def finish(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()

    def join(self) -> int:
        self.finish()
        with self._process:  # (closes its pipes, waits for it)
            out = self._process.stdout.read() if self._process.stdout is not None else b""
        if self._process.returncode != 0:
            log.warning("the full-text indexer beside the rebuild stopped (exit code %s)", self._process.returncode)
            return 0
        return int(out.decode().strip() or 0)


if __name__ == "__main__":
    print(index_beside(sys.argv[1], _stdin_closed))
