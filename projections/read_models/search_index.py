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

from projections.read_models.positions import position, set_position, transaction
from projections.read_models.search_terms import index_terms, story_term

log = logging.getLogger(__name__)

SEARCH = "search"  # the position of the full-text index: the last node_texts.seq it holds
BESIDE_BATCH = 2000  # texts per transaction of the indexer beside a rebuild
BESIDE_PAUSE = 0.05  # seconds it waits for the fold to commit more texts
BESIDE_FINISH = 600.0  # seconds it is given to index what is left once the fold is done (then it is stopped)
# the indexer's process: this module, found as the parent finds it (its folder after the rest of the
# path, the folder it starts in left out: a checkout there would be imported instead)
_CHILD = "import sys; sys.path.append(sys.argv[1]); from projections.read_models.search_index import main; main()"


def index_texts(conn: sqlite3.Connection, limit: int) -> int:
    """Index up to `limit` texts changed since the index's position, oldest change first, in one
    transaction; return how many (fewer than `limit`: the index is up to date). `conn` autocommits
    (isolation_level None). Several processes may index one file: the writes land only if the
    index's position is still where the rows were read from."""
    start = position(conn, SEARCH)
    rows = conn.execute(
        "select rowid, story_id, text, seq from node_texts where seq > ? order by seq limit ?", [start, limit]
    ).fetchall()
    if not rows:
        return 0
    terms = [(rowid, f"{story_term(story_id)} {index_terms(text)}") for rowid, story_id, text, _ in rows]
    with transaction(conn):  # (the terms are worked out first: the lock is held for the writes alone)
        if position(conn, SEARCH) != start:  # another process indexed these meanwhile: the caller asks again
            return len(rows)
        conn.executemany("delete from node_texts_fts where rowid = ?", [(r[0],) for r in rows])
        conn.executemany("insert into node_texts_fts (rowid, terms) values (?, ?)", terms)
        set_position(conn, SEARCH, rows[-1][3])
    return len(rows)


def index_beside(path: str, done: Callable[[float], bool], batch: int = BESIDE_BATCH) -> int:
    """Index the texts of the read-model file at `path` as a fold commits them, until `done(pause)`
    (which may wait up to `pause` seconds for it) is true and every text committed before is indexed;
    return how many texts were indexed (a text changed again after it was indexed counts again). Its
    commits neither sync nor checkpoint, as the fold's do not (the rebuild checkpoints at the end)."""
    conn = sqlite3.connect(path, isolation_level=None)
    indexed = 0
    try:
        for pragma in ("busy_timeout=60000", "synchronous=OFF", "wal_autocheckpoint=0"):
            conn.execute(f"PRAGMA {pragma}")
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


def main() -> None:
    """The indexer's process (its arguments: this package's folder, the read-model file): index until the
    input is closed; print the count."""
    print(index_beside(sys.argv[2], _stdin_closed), flush=True)


def _stdin_closed(pause: float) -> bool:
    """True once the parent closed this process's input (waiting up to `pause` seconds for it)."""
    readable, _, _ = select.select([sys.stdin], [], [], pause)
    return bool(readable) and not os.read(sys.stdin.fileno(), 1)


class IndexerBeside:
    """The full-text index of a read-model file built by a process of its own while the caller folds
    into that file: it indexes until its input is closed, then prints how many texts it indexed.
    `finish()` once the last batch is committed, then `join()`: that count; `stop()` instead, when the
    fold failed. A process that cannot start raises OSError (the caller indexes alone); one that fails,
    or takes longer than `BESIDE_FINISH` to finish, counts 0, and the caller's own indexing afterwards
    finds the texts it left."""

    def __init__(self, path: str, finish_seconds: float = BESIDE_FINISH) -> None:
        root = str(Path(__file__).resolve().parents[2])  # (where this package is, installed or not)
        self._finish_seconds = finish_seconds
        self._process = subprocess.Popen(
            [sys.executable, "-P", "-c", _CHILD, root, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def finish(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
            self._process.stdin = None  # (communicate then leaves it alone)

    def join(self) -> int:
        self.finish()
        try:
            out, _ = self._process.communicate(timeout=self._finish_seconds)
        except subprocess.TimeoutExpired:
            log.warning(
                "the full-text indexer beside the rebuild took over %.0f s to finish; stopped", self._finish_seconds
            )
            self.stop()
            return 0
        if self._process.returncode != 0:
            log.warning("the full-text indexer beside the rebuild stopped (exit code %s)", self._process.returncode)
            return 0
        try:
            return int(out.decode(errors="replace").strip().rsplit("\n", 1)[-1])
        except ValueError:  # (something else wrote to its output: the count is the last line)
            return 0

    def stop(self) -> None:
        """End the process now (what it committed stays: each of its batches is one transaction)."""
        self.finish()
        self._process.kill()
        self._process.communicate()
