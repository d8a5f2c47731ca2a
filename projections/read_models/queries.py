"""Every query of the read models: the tree (children, paths, ancestry, a chat's links), story and card
lists, full-text search, costs, the scene, recall's archive of passages, and the jobs. Each reads on the
reading connection of the calling thread (`db`); `ReadModels` (`store.py`) opens it and writes the tables."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import sqlite_utils

from domain.tree.rules.reconcile import Found
from projections.read_models.memory_queries import MemoryQueries
from projections.read_models.scenes import SceneAt, SceneTables
from projections.read_models.search_terms import match_expression, story_term

LINKS_PER_QUERY = 5_000  # a chat's links looked up in one query
PREVIEW_CHARS = 80  # of a node's text in the tree listing


@dataclass(frozen=True, slots=True)
class SearchHit:
    node_id: str
    story_id: str
    kind: str
    depth: int
    turn: int
    hidden: bool
    snippet: str


class ReadQueries(MemoryQueries):
    scenes: SceneTables  # the scene tables (their lookups are cached beside the writing connection)

    @property
    def db(self) -> sqlite_utils.Database:
        """The calling thread's reading connection."""
        raise NotImplementedError

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

    def relayed(self, story_id: UUID) -> bool:
        """Whether a reply of the story answered a front end through the proxy (the chat is that front end's)."""
        row = self.db.execute("select relayed from stories where id = ?", [str(story_id)]).fetchone()
        return bool(row and row[0])

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

    def job(self, tenant_id: str, job_id: str) -> dict[str, Any] | None:
        """One of the tenant's jobs by its id (`<kind>:<node id>`), None when it has none of that id."""
        sql = "select j.* from jobs j join stories s on s.id = j.story_id where j.id = ? and s.tenant_id = ?"
        rows = list(self.db.query(sql, [job_id, tenant_id]))
        return rows[0] if rows else None

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


def _snippet(text: str, query: str, width: int = 60) -> str:
    terms = [t for t in query.split() if t]
    at = min((i for i in (text.lower().find(t.lower()) for t in terms) if i >= 0), default=0)
    start = max(at - width // 2, 0)
    return ("…" if start else "") + text[start : start + width * 2] + ("…" if start + width * 2 < len(text) else "")
