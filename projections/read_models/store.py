"""Read models in their own SQLite file, written with sqlite-utils.

Each batch of events and the tracked position are written in one transaction, so a crash leaves the
tables exactly at some position and the runner resumes from there. `drop()` + a replay from
position 0 rebuilds everything (`changji projections rebuild`).

Tables: `nodes` (the tree: every tree query reads it), `node_texts`, `stories` and `cards` (lists
per tenant), `positions`, and the tables of `rows`/`scenes`.

The full-text index (`node_texts_fts`, FTS5 over CJK bigrams) follows `node_texts` a step behind
instead of inside every fold: each text row carries the position of its last change (`seq`), and
`index_texts` indexes the rows changed since its own position (`search`). A turn's fold then writes no
FTS segment (an FTS5 insert per transaction, with its merges, cost more than the rest of the fold), and
indexing many texts in one transaction makes fewer, larger segments. Whoever searches brings the index
up to date first (`ProjectionRunner.index_search`), so a search still sees every write that returned.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import sqlite_utils

from domain.tree.rules.reconcile import Found
from projections.read_models import archive, positions, search_index
from projections.read_models.rows import RowChanges, job_time
from projections.read_models.scenes import SceneAt, SceneTables
from projections.read_models.search_index import SEARCH
from projections.read_models.search_terms import match_expression, story_term

TABLES = (
    "nodes", "node_texts", "node_texts_fts", "stories", "cards", "model_calls", "jobs", "scenes", "scene_patches",
    "passages", "positions",
)  # fmt: skip
SCHEMA, SCHEMA_VERSION = "schema", 10  # bump when a table changes: the read models are then rebuilt
LINKS_PER_QUERY = 5_000  # a chat's links looked up in one query
PREVIEW_CHARS = 80  # of a node's text in the tree listing
# a replay from 0: no sync or checkpoint at its commits, a page cache of 256 MiB (SQLite's default: 2
# MiB), a minute's wait for a writer beside it; and the connection's settings for serving
LOADING = ("synchronous=OFF", f"cache_size=-{256 * 1024}", "wal_autocheckpoint=0", "busy_timeout=60000")
SERVING = ("synchronous=NORMAL", "cache_size=-2000", "busy_timeout=5000")
RUNNER = "main"
JOBS_FOLDED = "jobs folded:"  # + a job kind: how many job rows of the kind were folded (a running count)
REBUILT = "rebuilt"  # the position a rebuild into a new file reached: that file is complete up to there
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


@dataclass(frozen=True, slots=True)
class SearchHit:
    node_id: str
    story_id: str
    kind: str
    depth: int
    turn: int
    hidden: bool
    snippet: str


class ReadModels:
    """The read-model database. One writer (the runner's thread); readers open their own connections."""

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
                    "nodes": int, "saves": int, "summaries": int, "deleted": int, "created_at": str,
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
            db.table("positions").upsert({"name": SCHEMA, "position": SCHEMA_VERSION}, pk="name")

    def drop(self) -> None:
        """Remove every read-model table; `_create` runs again so the runner can replay from 0."""
        db = self.writer
        with self._transaction():
            for name in TABLES:
                db.execute(f"drop table if exists {name}")
        self._create()

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

    def apply(self, batch: Sequence[tuple[int, Any]], name: str = RUNNER) -> int:
        """Fold a batch of (notification id, event) into the tables and advance the position, atomically;
        return the position the tables are at.

        Several processes may fold into one file (the workers of one service): only what lies beyond
        the position is folded, and the writes land only if the position is still where the fold
        began, checked inside the transaction (which holds the file's write lock); else nothing is
        written and the position another process reached is returned (the caller reads on from it).
        The fold itself runs before the transaction, so the lock is held for the writes alone."""
        position = self.position(name)
        start = next((i for i, (seq, _) in enumerate(batch) if seq > position), len(batch))
        if start == len(batch) or batch[start][0] != position + 1:
            return position
        changes = RowChanges(self._lookup, self._node_row, self._children_of)
        for seq, event in batch[start:]:
            changes.fold(event, seq)
        with self._transaction():
            now = self.position(name)
            if now != position:  # another process folded meanwhile
                return now
            self._write(changes)
            added = Counter(row["kind"] for row in changes.job_rows.values())
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
        for table in ("cards", "stories", "model_calls"):
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

    def children(self, node_id: UUID) -> list[dict[str, Any]]:
        return list(self.db.query("select * from nodes where parent_id = ? order by seq", [str(node_id)]))

    def story_nodes(self, story_id: UUID, after_seq: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """The story's nodes folded after `after_seq`, each with the first PREVIEW_CHARS of its text."""
        rows = list(
            self.db.query(  # the text's first bytes as a blob: SQLite's text functions stop at a NUL
                "select n.*, substr(cast(t.text as blob), 1, ?) as preview from nodes n left join node_texts t"
                " on t.node_id = n.id where n.story_id = ? and n.seq > ? order by n.seq limit ?",
                [PREVIEW_CHARS * 4, str(story_id), after_seq, limit],
            )
        )
        for row in rows:  # (a character the byte cut split in two is dropped, the rest cut to size)
            raw = row["preview"]
            row["preview"] = raw.decode("utf-8", "ignore")[:PREVIEW_CHARS] if raw is not None else None
        return rows

    def is_ancestor(self, ancestor_id: UUID, node_id: UUID) -> bool:
        row = self.db.execute(
            "with recursive up(id, parent_id, depth) as ("
            " select id, parent_id, depth from nodes where id = ?"
            " union all select n.id, n.parent_id, n.depth from nodes n join up on n.id = up.parent_id"
            "  where up.depth > (select depth from nodes where id = ?))"
            " select 1 from up where id = ? limit 1",
            [str(node_id), str(ancestor_id), str(ancestor_id)],
        ).fetchone()
        return row is not None

    def ancestry(self, node_id: UUID) -> list[tuple[str, int]] | None:
        """(id, depth) of the node and every node above it, leaf first; None if it is not folded yet."""
        rows = self.db.execute(
            "with recursive up(id, parent_id, depth) as ("
            " select id, parent_id, depth from nodes where id = ?"
            " union all select n.id, n.parent_id, n.depth from nodes n join up on n.id = up.parent_id)"
            " select id, depth from up order by depth desc",
            [str(node_id)],
        ).fetchall()
        return [(str(r[0]), int(r[1])) for r in rows] if rows else None

    def path_up(self, node_id: UUID) -> list[UUID]:
        """The ids of the node and every node above it, leaf first (none if it is not folded yet)."""
        return [UUID(node) for node, _ in self.ancestry(node_id) or []]

    def path_ids(self, node_id: UUID, min_depth: int) -> set[UUID]:
        rows = self.db.execute(
            "with recursive up(id, parent_id, depth) as ("
            " select id, parent_id, depth from nodes where id = ?"
            " union all select n.id, n.parent_id, n.depth from nodes n join up on n.id = up.parent_id"
            "  where up.depth > ?)"
            " select id from up",
            [str(node_id), min_depth],
        ).fetchall()
        return {UUID(r[0]) for r in rows}

    def linked(self, tenant_id: str, keys: Sequence[bytes], story_id: UUID | None, most: int) -> list[Found]:
        """The finished nodes of the tenant's stories (of `story_id` alone, when given) whose `link` is one
        of `keys`, each at every place of `keys` it has (b"": not looked up), the most recently changed
        stories' first, `most` at most: where a proxied chat's messages lie in the tree."""
        places: dict[bytes, list[int]] = {}
        for at, key in enumerate(keys):
            if key:
                places.setdefault(key, []).append(at)
        found: list[Found] = []
        wanted = list(reversed(places))  # the chat's newest messages first: `most` keeps its end
        # (nodes by their link first — a cross join keeps SQLite from reading a tenant's stories node by node)
        for i in range(0, len(wanted), LINKS_PER_QUERY):
            chunk = wanted[i : i + LINKS_PER_QUERY]
            story = " and s.id = ?" if story_id is not None else ""
            rows = self.db.execute(
                "select n.id, n.parent_id, n.story_id, n.link from nodes n cross join stories s on s.id = n.story_id"
                f" where n.link in ({', '.join('?' for _ in chunk)}) and s.tenant_id = ? and s.deleted = 0{story}"
                " and n.phase in ('final', 'sealed', 'stopped') order by s.updated_at desc, s.seq desc limit ?",
                [*chunk, tenant_id, *([str(story_id)] if story_id is not None else []), most - len(found)],
            ).fetchall()
            found += [Found(row[0], row[1], row[2], at) for row in rows for at in places[row[3]]]
            if len(found) >= most:
                break
        return found

    def stories_shown(self, story_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """What a list shows of each story besides its row: its card's name and its leaf's first words."""
        if not story_ids:
            return {}
        rows = self.db.execute(
            "select s.id, coalesce(c.name, ''), coalesce(substr(t.text, 1, 200), '') from stories s"
            " left join cards c on c.id = s.card_id left join node_texts t on t.node_id = s.leaf_id"
            f" where s.id in ({', '.join('?' for _ in story_ids)})",
            list(story_ids),
        ).fetchall()
        return {row[0]: {"card_name": row[1], "last_words": row[2]} for row in rows}

    def recent_stories(self, tenant_id: str, limit: int) -> list[UUID]:
        """A tenant's stories, the most recently changed first."""
        rows = self.db.execute(
            "select id from stories where tenant_id = ? and deleted = 0 order by updated_at desc, seq desc limit ?",
            [tenant_id, limit],
        ).fetchall()
        return [UUID(row[0]) for row in rows]

    def list_rows(
        self, table: str, tenant_id: str, after: int, limit: int, deleted: int = 0, **where: str
    ) -> list[dict[str, Any]]:
        """A tenant's rows of `table` after `after` (their `seq`): the deleted ones when `deleted` is 1."""
        clauses = ["tenant_id = ?", "deleted = ?", "seq > ?"]
        args: list[Any] = [tenant_id, deleted, after]
        for column, value in where.items():
            clauses.append(f"{column} = ?")
            args.append(value)
        sql = f"select * from {table} where {' and '.join(clauses)} order by seq limit ?"
        return list(self.db.query(sql, [*args, limit]))

    def search(self, story_id: UUID, query: str, limit: int = 20) -> list[SearchHit]:
        expression = match_expression(query)
        if expression is not None:
            sql = (
                "select t.node_id, t.text, n.* from node_texts_fts f join node_texts t on t.rowid = f.rowid "
                "join nodes n on n.id = t.node_id where node_texts_fts match ? and t.story_id = ? "
                "order by rank limit ?"
            )
            args: list[Any] = [f'"{story_term(str(story_id))}" {expression}', str(story_id), limit]
        else:
            sql = (
                "select t.node_id, t.text, n.* from node_texts t join nodes n on n.id = t.node_id "
                "where t.story_id = ? and instr(t.text, ?) > 0 order by n.seq limit ?"
            )
            args = [str(story_id), query, limit]
        return [
            SearchHit(
                r["node_id"], r["story_id"], r["kind"], r["depth"], r["turn"], bool(r["hidden"]),
                _snippet(r["text"], query),
            )
            for r in self.db.query(sql, args)
        ]  # fmt: skip

    def costs(self, story_id: UUID | None = None, card_id: UUID | None = None) -> list[dict[str, Any]]:
        """Model calls summed per purpose and model, for one story or for every story of a card."""
        where, arg = ("m.story_id = ?", str(story_id)) if story_id else ("s.card_id = ?", str(card_id))
        return list(
            self.db.query(
                "select m.purpose, m.model, count(*) as calls, sum(m.outcome = 'ok') as ok,"
                " sum(m.prompt_tokens) as prompt_tokens, sum(m.completion_tokens) as completion_tokens,"
                " round(sum(m.latency_ms), 3) as latency_ms from model_calls m join stories s on s.id = m.story_id"
                f" where {where} group by m.purpose, m.model order by m.purpose, m.model",
                [arg],
            )
        )

    # --- scene and jobs -----------------------------------------------------------------------

    def scene(self, node_id: UUID) -> SceneAt | None:
        """The scene at a node (None when nothing on its path was ever patched)."""
        return self.scenes.at(str(node_id), self.db)

    def passages(self, story_id: UUID, after_seq: int = 0) -> list[dict[str, Any]]:
        """The story's archived passages changed after `after_seq`, in the order of their last change
        (none while the story is deleted)."""
        if self._deleted(story_id):
            return []
        return list(
            self.db.query(
                "select * from passages where story_id = ? and seq > ? order by seq, id", [str(story_id), after_seq]
            )
        )

    def _deleted(self, story_id: UUID) -> bool:
        row = self.db.execute("select deleted from stories where id = ?", [str(story_id)]).fetchone()
        return bool(row and row[0])

    @property
    def generation(self) -> int:
        """Which file is read: bumped when a rebuilt one takes over (`reopen`)."""
        return self._generation

    def passage_ids(self, story_id: UUID) -> set[str]:
        """The ids of the story's archived passages now (none while it is deleted)."""
        if self._deleted(story_id):
            return set()
        rows = self.db.execute("select id from passages where story_id = ?", [str(story_id)]).fetchall()
        return {row[0] for row in rows}

    def parents_since(self, story_id: UUID, after_seq: int) -> tuple[dict[str, str], int]:
        """The story's nodes changed after `after_seq` → their parents, and the last change among them
        (`after_seq` when none): what a map of `parents` read up to there lacks."""
        rows = self.db.execute(
            "select id, parent_id, seq from nodes where story_id = ? and seq > ? and parent_id is not null",
            [str(story_id), after_seq],
        ).fetchall()
        return {node: parent for node, parent, _ in rows}, max((seq for _, _, seq in rows), default=after_seq)

    def archive_seq(self, story_id: UUID) -> int:
        """The position of the last change to the story's archive (0: nothing archived, or deleted)."""
        if self._deleted(story_id):
            return 0
        row = self.db.execute("select max(seq) from passages where story_id = ?", [str(story_id)]).fetchone()
        return int(row[0] or 0)

    def has_summaries(self, story_id: UUID) -> bool:
        row = self.db.execute("select summaries from stories where id = ?", [str(story_id)]).fetchone()
        return bool(row and row[0])

    def scene_on_path(self, upward: Iterable[UUID]) -> SceneAt | None:
        """The scene at the first node of `upward` (a path read leaf→root) that the read models know:
        nodes not folded yet carry no folded patch either, so this is exact as of the read models."""
        for node_id in upward:
            known, scene = self.scenes.lookup(str(node_id), self.db)
            if known:
                return scene
        return None

    def scene_patches(self, node_id: UUID) -> list[dict[str, Any]]:
        return [
            {**row, "patch": json.loads(row["patch"]), "warnings": json.loads(row["warnings"])}
            for row in self.db.query(
                "select seq, author, patch, warnings, at from scene_patches where node_id = ? order by seq",
                [str(node_id)],
            )
        ]

    def jobs(
        self,
        tenant_id: str,
        after: int,
        limit: int,
        story_id: UUID | None,
        kind: str | None,
        statuses: Sequence[str] | None,
    ) -> list[dict[str, Any]]:
        """The tenant's jobs after `after` (their `seq`), of a story, a kind and any of `statuses` if given."""
        clauses, args = ["s.tenant_id = ?", "s.deleted = 0", "j.seq > ?"], [tenant_id, after]
        for column, value in (("j.story_id", story_id), ("j.kind", kind)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(str(value))
        if statuses is not None:
            clauses.append(f"j.status in ({', '.join('?' for _ in statuses)})")
            args.extend(statuses)
        sql = (
            "select j.* from jobs j join stories s on s.id = j.story_id"
            f" where {' and '.join(clauses)} order by j.seq limit ?"
        )
        return list(self.db.query(sql, [*args, limit]))

    def job_counts(self, story_id: UUID) -> tuple[dict[str, int], list[tuple[str, str]]]:
        """A story's jobs counted by status, and (id, status) of those still due (pending or retrying)."""
        rows = self.db.execute("select status, count(*) from jobs where story_id = ? group by status", [str(story_id)])
        counts = {status: n for status, n in rows.fetchall()}
        due = self.db.execute(
            "select id, status from jobs where story_id = ? and status in ('pending', 'retrying')", [str(story_id)]
        )
        return counts, [(job_id, status) for job_id, status in due.fetchall()]

    def due_jobs(
        self, now: str, limit: int, kinds: Sequence[str] | None = None, heads: bool = False
    ) -> list[dict[str, Any]]:
        """Jobs waiting to run (new, or failed with a retry that is due), oldest first. With `heads`, only
        the oldest unsettled job of each story and kind: one story's backlog never holds up another's."""
        where = "j.status in ('pending', 'retrying') and j.next_at <= ?"
        if kinds is not None:
            where += f" and j.kind in ({', '.join('?' for _ in kinds)})"
        if heads:
            where += (
                " and j.seq = (select min(k.seq) from jobs k where k.story_id = j.story_id and k.kind = j.kind"
                " and k.status in ('pending', 'retrying'))"
            )
        return list(
            self.db.query(
                "select j.*, s.deleted as story_deleted from jobs j join stories s on s.id = j.story_id"
                f" where {where} order by j.seq limit ?",
                [now, *(kinds or ()), limit],
            )
        )

    def next_due(self) -> str | None:
        row = self.db.execute("select min(next_at) from jobs where status in ('pending', 'retrying')").fetchone()
        return row[0] if row else None

    def predecessor_job(self, node_id: UUID, kind: str) -> tuple[str, str | None] | None:
        """The previous reply on this reply's path and the status of its job of `kind` (None: it has
        no such job, e.g. a draft that was never sealed); None when the previous node is the greeting."""
        row = self.db.execute(
            "select p.id, j.status from nodes r join nodes u on u.id = r.parent_id join nodes p on p.id = u.parent_id"
            " left join jobs j on j.id = ? || ':' || p.id where r.id = ? and p.kind = 'reply'",
            [kind, str(node_id)],
        ).fetchone()
        return (row[0], row[1]) if row else None

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """Every row of every table (for comparing a rebuild with the live tables)."""
        out = {}
        for name in TABLES:
            order = (  # (the positions by name: their rows are made in the order the log's events came in)
                f"select * from {name} order by {'id' if name == 'passages' else 'name'}"
                if name in ("passages", "positions")
                else f"select rowid, * from {name} order by rowid"
            )
            out[name] = list(self.writer.query(order))
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


def _snippet(text: str, query: str, width: int = 60) -> str:
    terms = [t for t in query.split() if t]
    at = min((i for i in (text.lower().find(t.lower()) for t in terms) if i >= 0), default=0)
    start = max(at - width // 2, 0)
    return ("…" if start else "") + text[start : start + width * 2] + ("…" if start + width * 2 < len(text) else "")
