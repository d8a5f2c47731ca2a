"""Read models in their own SQLite file, written with sqlite-utils.

Each batch of events and the tracked position are written in one transaction, so a crash leaves the
tables exactly at some position and the runner resumes from there. `drop()` + a replay from
position 0 rebuilds everything (`changji projections rebuild`).

Tables: `nodes` (the tree: every tree query reads it), `node_texts`, `stories` and `cards` (lists
per tenant), `positions`, and the tables of `rows`/`scenes`/`memory_rows`.

The full-text index (`node_texts_fts`, FTS5 over CJK bigrams) follows `node_texts` a step behind
instead of inside every fold: each text row carries the position of its last change (`seq`), and
`index_texts` indexes the rows changed since its own position (`search`). A turn's fold then writes no
FTS segment (an FTS5 insert per transaction, with its merges, cost more than the rest of the fold), and
indexing many texts in one transaction makes fewer, larger segments. Whoever searches brings the index
up to date first (`ProjectionRunner.index_search`), so a search still sees every write that returned.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from projections.read_models import archive, positions, search_index
from projections.read_models.memory_rows import MEMORY_TABLES, create_memory_tables
from projections.read_models.queries import ReadQueries
from projections.read_models.rows import RowChanges, job_time
from projections.read_models.scenes import SceneTables
from projections.read_models.search_index import SEARCH

TABLES = (
    "nodes", "node_texts", "node_texts_fts", "stories", "cards", "model_calls", "jobs", "scenes", "scene_patches",
    "passages", "positions", *MEMORY_TABLES,
)  # fmt: skip
SCHEMA, SCHEMA_VERSION = "schema", 13  # bump when a table changes: the read models are then rebuilt
# a replay from 0: no sync or checkpoint at its commits, a page cache of 256 MiB (SQLite's default: 2
# MiB), a minute's wait for a writer beside it; and the connection's settings for serving
LOADING = ("synchronous=OFF", f"cache_size=-{256 * 1024}", "wal_autocheckpoint=0", "busy_timeout=60000")
SERVING = ("synchronous=NORMAL", "cache_size=-2000", "busy_timeout=5000")
RUNNER = "main"
JOBS_FOLDED = (
    "jobs folded:"  # + a job kind: how many job rows of the kind were made or made due again (a running count)
)
REBUILT = "rebuilt"  # the position a rebuild into a new file reached: that file is complete up to there
FOLDED_FROM = "folded from:"  # + the identity of the database the tables are folded from (a shared one)
# the scene fold walks the first two; text upserts need the unique key of the third, and the indexer
# beside a rebuild reads the texts by the fourth
KEPT_WHILE_LOADING = (
    "idx_nodes_parent_id",
    "idx_scene_patches_node_id_seq",
    "idx_node_texts_node_id",
    "idx_node_texts_seq",
    "idx_passages_node_id",
    "idx_passages_user_id",
)  # fmt: skip (the archive replaces a reply's passages and flags them by these)


class ReadModels(ReadQueries):
    """The read-model database. One writer (the runner's thread); readers open their own connections,
    which every query of `ReadQueries` reads on."""

    def __init__(self, path: str | Path, log_limit_bytes: int | None = None) -> None:
        """`log_limit_bytes`: the writing connection leaves WAL checkpoints to someone else
        (`api.checkpoints.Checkpointer`) instead of running them inside a fold's commit, and a log that
        starts over is cut back to that size. None: SQLite's automatic checkpoints."""
        self.path = str(path)
        self.log_limit_bytes = log_limit_bytes
        self._local = threading.local()
        self._generation = 0  # bumped by `reopen`: each thread's reading connection follows
        self.jobs_added: Counter[str] = Counter()  # job rows folded per kind, as of the runner's last catch-up
        self._open_writer()
        if self._schema() not in (None, SCHEMA_VERSION):
            self.drop()  # an older layout: start over; the runner replays every event from position 0
        self._create()

    def folded_from(self) -> str | None:
        """Which store these tables were folded from, as `mark_folded_from` noted it (None: not noted)."""
        row = self.writer.execute(
            "select name from positions where name >= ? and name < ?", [FOLDED_FROM, FOLDED_FROM + "~"]
        ).fetchone()
        return str(row[0]).removeprefix(FOLDED_FROM) if row else None

    def mark_folded_from(self, store: str) -> None:
        """Note the store (a shared database's identity) these tables are folded from."""
        with self._transaction():
            self.writer.execute("delete from positions where name >= ? and name < ?", [FOLDED_FROM, FOLDED_FROM + "~"])
            positions.set_position(self.writer.conn, FOLDED_FROM + store, 1)

    def mark_rebuilt(self) -> None:
        """Record that this file was rebuilt up to its position (a file `reopen` may switch to)."""
        positions.set_position(self.writer.conn, REBUILT, self.position())

    def _open_writer(self) -> None:
        self.writer = self._connect()
        if self.log_limit_bytes is not None:
            self.writer.execute("PRAGMA wal_autocheckpoint=0")
            self.writer.execute(f"PRAGMA journal_size_limit={int(self.log_limit_bytes)}")
        self.scenes = SceneTables(self.writer)

    @staticmethod
    def check(path: str | Path, rebuilt: bool = True) -> None:
        """Refuse (ValueError) a file that is missing, is not a database of this read-model layout, or
        (`rebuilt`) is not a finished rebuild; it is only read (a missing file is not made). Other
        errors (a busy or unreadable file) are raised as they are: the file may do once they pass."""
        text = str(path)
        if not text.startswith("file:") and not Path(text).exists():
            raise ValueError(f"{path} cannot be opened: there is no such file")
        uri = text if text.startswith("file:") else Path(text).resolve().as_uri()
        probe = sqlite3.connect(f"{uri}{'&' if '?' in uri else '?'}mode=ro", uri=True)
        try:
            marks = dict(probe.execute("select name, position from positions").fetchall())
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            marks = {}
        except sqlite3.DatabaseError:  # (not a database at all)
            marks = {}
        finally:
            probe.close()
        if marks.get(SCHEMA) != SCHEMA_VERSION or (rebuilt and REBUILT not in marks):
            raise ValueError(f"{path} is not a finished rebuild of read-model layout {SCHEMA_VERSION}")

    def reopen(self, path: str | Path, rebuilt: bool = True) -> None:
        """Switch to another read-model file (a rebuilt one) in place, for every thread: the caller holds
        the runner's lock, so no fold is under way; each reading connection is replaced at its thread's
        next read. A file of another layout is refused (ValueError), and this one stays; so is one that
        is not a finished rebuild, unless `rebuilt` is False (a file that was in use already)."""
        self.check(path, rebuilt)
        old, old_path, old_scenes = self.writer, self.path, self.scenes
        self.path = str(path)
        try:
            self._open_writer()
        except BaseException:
            self.path, self.writer, self.scenes = old_path, old, old_scenes
            raise
        self._generation += 1
        old.conn.close()

    def _connect(self) -> sqlite_utils.Database:
        conn = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, uri=self.path.startswith("file:")
        )
        conn.execute("PRAGMA journal_mode=WAL")
        for pragma in SERVING:
            conn.execute(f"PRAGMA {pragma}")
        return sqlite_utils.Database(conn)

    @property
    def db(self) -> sqlite_utils.Database:
        """A connection for reading, one per thread."""
        db: sqlite_utils.Database | None = getattr(self._local, "db", None)
        if db is None or self._local.generation != self._generation:
            if db is not None:
                db.conn.close()
            db = self._local.db = self._connect()
            self._local.generation = self._generation
        return db

    def _create(self) -> None:
        db = self.writer
        with self._transaction():
            db.table("positions").create({"name": str, "position": int}, pk="name", if_not_exists=True)
            db.table("nodes").create(
                {
                    "id": str, "story_id": str, "parent_id": str, "kind": str, "depth": int, "turn": int,
                    "hidden": int, "starred": int, "revisions": int, "chars": int, "phase": str,
                    "created_at": str, "seq": int, "scene_at": str, "link": bytes,
                },
                pk="id", if_not_exists=True,
            )  # fmt: skip
            db.table("nodes").create_index(["story_id", "seq"], if_not_exists=True)  # a story's nodes since
            db.table("nodes").create_index(["link"], if_not_exists=True)  # a proxied chat's messages, found
            db.execute("drop index if exists idx_nodes_story_id_parent_id")  # (no query read it; files had it)
            db.table("nodes").create_index(["parent_id"], if_not_exists=True)
            db.table("node_texts").create(  # `id` is the full-text index's rowid: an explicit key keeps it
                {"id": int, "node_id": str, "story_id": str, "text": str, "seq": int}, pk="id", if_not_exists=True
            )  # (a VACUUM may renumber implicit rowids)
            db.table("node_texts").create_index(["node_id"], unique=True, if_not_exists=True)
            db.table("node_texts").create_index(["story_id"], if_not_exists=True)
            db.table("node_texts").create_index(["seq"], if_not_exists=True)
            # its own copy of the terms (so a row can be deleted by rowid); rowid = node_texts.id
            db.execute("create virtual table if not exists node_texts_fts using fts5(terms, tokenize = 'unicode61')")
            db.table("stories").create(
                {
                    "id": str, "tenant_id": str, "card_id": str, "title": str, "root_id": str, "leaf_id": str,
                    "nodes": int, "saves": int, "summaries": int, "deleted": int, "relayed": int, "created_at": str,
                    "updated_at": str, "seq": int,
                },
                pk="id", if_not_exists=True,
            )  # fmt: skip
            db.table("stories").create_index(["tenant_id", "seq"], if_not_exists=True)
            db.table("stories").create_index(["card_id", "seq"], if_not_exists=True)
            db.table("cards").create(
                {
                    "id": str, "tenant_id": str, "name": str, "tags": str, "deleted": int,
                    "created_at": str, "updated_at": str, "seq": int,
                },
                pk="id", if_not_exists=True,
            )  # fmt: skip
            db.table("cards").create_index(["tenant_id", "seq"], if_not_exists=True)
            db.table("model_calls").create(
                {
                    "seq": int, "node_id": str, "story_id": str, "purpose": str, "model": str,
                    "prompt_tokens": int, "completion_tokens": int, "latency_ms": float, "outcome": str, "at": str,
                },
                pk="seq", if_not_exists=True,
            )  # fmt: skip
            db.table("model_calls").create_index(["story_id"], if_not_exists=True)
            db.table("jobs").create(
                {
                    "id": str, "kind": str, "node_id": str, "story_id": str, "status": str, "attempts": int,
                    "detail": str, "next_at": str, "created_at": str, "updated_at": str, "seq": int,
                },
                pk="id", if_not_exists=True,
            )  # fmt: skip
            db.table("jobs").create_index(["status", "next_at"], if_not_exists=True)
            db.table("jobs").create_index(["story_id", "seq"], if_not_exists=True)
            db.table("jobs").create_index(["story_id", "kind", "status", "seq"], if_not_exists=True)
            self.scenes.create()
            archive.create(db)
            create_memory_tables(db)
            db.table("positions").upsert({"name": SCHEMA, "position": SCHEMA_VERSION}, pk="name")

    def drop(self) -> None:
        """Remove every read-model table; `_create` runs again so the runner can replay from 0 (from the
        same store: which one it is stays noted)."""
        db, store = self.writer, self.folded_from() if self.writer.table("positions").exists() else None
        with self._transaction():
            for name in TABLES:
                db.execute(f"drop table if exists {name}")
        self._create()
        if store is not None:
            self.mark_folded_from(store)

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """For a replay from position 0: secondary indexes are dropped while loading and built once at
        the end, which is much faster than maintaining them row by row; commits neither sync nor
        checkpoint meanwhile (`checkpoint()` after it), and a writer beside it (the full-text indexer)
        is waited for longer. (The full-text index is empty after `drop`; `index_texts` fills it.)"""
        db = self.writer
        with self._transaction():
            for (name,) in db.execute(
                "select name from sqlite_master where type = 'index' and name like 'idx_%' and name not in"
                f" ({', '.join('?' for _ in KEPT_WHILE_LOADING)})",
                KEPT_WHILE_LOADING,
            ).fetchall():
                db.execute(f"drop index {name}")
        for pragma in LOADING:
            db.execute(f"PRAGMA {pragma}")
        try:
            yield
        finally:
            try:
                self._create()
            finally:  # (the connection serves on as before, whatever happened)
                for pragma in (*SERVING, f"wal_autocheckpoint={0 if self.log_limit_bytes is not None else 1000}"):
                    db.execute(f"PRAGMA {pragma}")

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the file and empty it (after a bulk load, which leaves it all
        in the log)."""
        self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # --- writing ------------------------------------------------------------------------------

    def _schema(self) -> int | None:
        if not self.writer.table("positions").exists():
            return None
        row = self.writer.execute("select position from positions where name = ?", [SCHEMA]).fetchone()
        return int(row[0]) if row else 1

    def position(self, name: str = RUNNER) -> int:
        return positions.position(self.writer.conn, name)

    def apply(self, batch: Sequence[tuple[int, Any]], name: str = RUNNER, after: int | None = None) -> int:
        """Fold a batch of (notification id, event) into the tables and advance the position, atomically;
        return the position the tables are at.

        The batch must hold every notification after the position up to its last one: `after` says it
        holds every one after that id (it was read from there: the log's ids may have gaps, as
        PostgreSQL's do where a transaction that took an id rolled back); without it, the batch must
        go on from the position with the next id.

        Several processes may fold into one file (the workers of one service): only what lies beyond
        the position is folded, and the writes land only if the position is still where the fold
        began, checked inside the transaction (which holds the file's write lock); else nothing is
        written and the position another process reached is returned (the caller reads on from it).
        The fold itself runs before the transaction, so the lock is held for the writes alone."""
        position = self.position(name)
        start = next((i for i, (seq, _) in enumerate(batch) if seq > position), len(batch))
        follows = batch[start][0] == position + 1 if start < len(batch) else False
        if start == len(batch) or not (follows or (after is not None and after <= position)):
            return position
        changes = RowChanges(self._lookup, self._node_row, self._children_of)
        for seq, event in batch[start:]:
            changes.fold(event, seq)
        with self._transaction():
            now = self.position(name)
            if now != position:  # another process folded meanwhile
                return now
            self._write(changes)
            added = Counter(row["kind"] for row in changes.job_rows.values()) + changes.jobs_requeued
            for kind, count in added.items():
                positions.add(self.writer.conn, JOBS_FOLDED + kind, count)
            last = int(batch[-1][0])
            positions.set_position(self.writer.conn, name, last)
        return last

    def count_jobs(self) -> Counter[str]:
        """Job rows folded into this file so far, per kind, by any process; kept as `jobs_added` (the
        runner reads them again after a catch-up that moved on: new rows, a sweep now)."""
        rows = self.writer.execute(
            "select name, position from positions where name >= ? and name < ?", [JOBS_FOLDED, JOBS_FOLDED + "~"]
        ).fetchall()
        self.jobs_added = Counter({name.removeprefix(JOBS_FOLDED): int(count) for name, count in rows})
        return self.jobs_added

    def _transaction(self) -> AbstractContextManager[None]:
        """One explicit transaction (the connection autocommits otherwise)."""
        return positions.transaction(self.writer.conn)

    def _node_row(self, node_id: str) -> dict[str, Any]:
        cursor = self.writer.execute("select * from nodes where id = ?", [node_id])
        row = cursor.fetchone()
        if row is None:
            raise LookupError(f"read models have no node {node_id}")
        return dict(zip([c[0] for c in cursor.description], row, strict=True))

    def _children_of(self, node_id: str) -> list[str]:
        return [row[0] for row in self.writer.execute("select id from nodes where parent_id = ?", [node_id])]

    def _lookup(self, node_id: str) -> tuple[str, str]:
        row = self.writer.execute("select story_id, text from node_texts where node_id = ?", [node_id]).fetchone()
        if row is None:
            raise LookupError(f"read models have no node {node_id}")
        return str(row[0]), str(row[1])

    def _write(self, changes: RowChanges) -> None:
        db = self.writer
        for table in ("cards", "stories", "model_calls", *MEMORY_TABLES):
            _insert_many(db, table, changes.inserts[table])
        self.scenes.insert_nodes(changes.inserts["nodes"])
        _insert_many(db, "jobs", list(changes.job_rows.values()), upsert_on="id")  # may be announced again
        for table, rows in changes.updates.items():
            for key, columns in rows.items():
                assignments = ", ".join(f"{c} = ?" for c in columns)
                db.execute(f"update {table} set {assignments} where id = ?", [*columns.values(), key])
        for table, counters in changes.increments.items():
            for key, counts in counters.items():
                assignments = ", ".join(f"{c} = {c} + ?" for c in counts)
                db.execute(f"update {table} set {assignments} where id = ?", [*counts.values(), key])
        _insert_many(db, "node_texts", list(changes.texts.values()), upsert_on="node_id")
        for seq, patched in changes.scene_patches:
            self.scenes.patched(seq, patched, job_time(patched.timestamp))
        changes.archive.write(db)

    # --- the full-text index --------------------------------------------------------------------

    def index_texts(self, limit: int) -> int:
        """Index up to `limit` texts changed since the index's position (`search_index.index_texts`)."""
        return search_index.index_texts(self.writer.conn, limit)

    def texts_to_index(self) -> int:
        """How many texts changed since the full-text index last caught up."""
        row = self.writer.execute("select count(*) from node_texts where seq > ?", [self.position(SEARCH)]).fetchone()
        return int(row[0])

    # --- reading ------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Which file is read: bumped when a rebuilt one takes over (`reopen`)."""
        return self._generation

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """Every row of every table (for comparing a rebuild with the live tables)."""
        out = {}
        for name in TABLES:
            order = (  # (the positions by name: their rows are made in the order the log's events came in)
                f"select * from {name} order by {'id' if name == 'passages' else 'name'}"
                if name in ("passages", "positions")
                else f"select rowid, * from {name} order by rowid"
            )
            rows = list(self.writer.query(order))  # (which store they came from is no row a fold makes)
            out[name] = (
                [r for r in rows if not str(r.get("name", "")).startswith(FOLDED_FROM)] if name == "positions" else rows
            )
        return out


def _insert_many(db: sqlite_utils.Database, table: str, rows: list[dict[str, Any]], upsert_on: str = "") -> None:
    """A plain executemany: sqlite-utils' insert_all spends most of its time type-checking every value."""
    if not rows:
        return
    columns = list(rows[0])
    sql = f"insert into {table} ({', '.join(columns)}) values ({', '.join('?' for _ in columns)})"
    if upsert_on:
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != upsert_on)
        sql += f" on conflict({upsert_on}) do update set {updates}"
    db.conn.executemany(sql, [tuple(row[c] for c in columns) for row in rows])
