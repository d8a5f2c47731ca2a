"""The scene read model: the folded snapshot and roster at every patched node, and a link from every
node to its nearest patched ancestor (or itself), so the scene at any node is one lookup.

Invariant: the state stored for a patched node P is the fold, in path order, of every patch on the
path root…P. Patches may arrive in any order (a late scribe result, a user's edit of an old node):
a patch on P relinks P's unpatched descendants to P and refolds the patched nodes below it, so the
tables always equal the fold along each path. Normal play patches the newest reply, so that costs a
few rows; an edit far up the tree costs one pass over the subtree below it, once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from domain.tree.rules.scene import Roster, SceneSnapshot, apply_patch
from domain.tree.work_events import ScenePatched


@dataclass(frozen=True, slots=True)
class SceneAt:
    """The scene at a node: folded up to `source_id`, the nearest patched node on its path."""

    source_id: str
    snapshot: SceneSnapshot
    roster: Roster
    patches: int


class SceneTables:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def create(self) -> None:
        self.db.table("scenes").create(
            {"node_id": str, "story_id": str, "depth": int, "state": str, "roster": str, "patches": int, "seq": int},
            pk="node_id",
            if_not_exists=True,
        )
        self.db.table("scene_patches").create(
            {
                "seq": int, "node_id": str, "story_id": str, "author": str, "patch": str, "warnings": str,
                "at": str,
            },
            pk="seq", if_not_exists=True,
        )  # fmt: skip
        self.db.table("scene_patches").create_index(["node_id", "seq"], if_not_exists=True)

    # --- writing (inside the read models' transaction) -----------------------------------------

    def insert_nodes(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert new `nodes` rows (parents first), each sharing its parent's link: the link is read in
        the INSERT itself, from the parent's row (one inserted earlier in the same statement included).
        Patches of the batch are applied after the inserts, so a node sees its parent as of before them."""
        if not rows:
            return
        columns = [c for c in rows[0] if c != "scene_at"]
        self.db.conn.executemany(
            f"insert into nodes ({', '.join(columns)}, scene_at) values ({', '.join('?' for _ in columns)},"
            " (select p.scene_at from nodes p where p.id = ?))",
            [(*(row[c] for c in columns), row["parent_id"]) for row in rows],
        )

    def patched(self, seq: int, event: ScenePatched, at: str) -> None:
        node_id = str(event.originator_id)
        row = self.db.execute("select story_id, scene_at from nodes where id = ?", [node_id]).fetchone()
        if row is None:
            raise LookupError(f"read models have no node {node_id}")
        story_id, link = row
        self.db.execute(
            "insert into scene_patches (seq, node_id, story_id, author, patch, warnings, at) values (?, ?, ?, ?, ?, ?, ?)",
            [seq, node_id, story_id, event.author, _dumps(event.patch), _dumps(event.warnings), at],
        )
        if link != node_id:  # the first patch here: this node and the unpatched nodes below now lead to it
            self.db.execute(
                "with recursive down(id) as (select ? union all select n.id from nodes n join down"
                " on n.parent_id = down.id where n.scene_at is null or n.scene_at != n.id)"
                " update nodes set scene_at = ? where id in (select id from down)",
                [node_id, node_id],
            )
        self._refold_from(node_id)

    def _refold_from(self, top: str) -> None:
        """Refold `top` and every patched node below it in one pass, shallowest first, each from the
        state of its nearest patched ancestor (kept in memory), and write them all at once."""
        down = (
            "with recursive down(id, parent_id, depth) as (select id, parent_id, depth from nodes where id = ?"
            " union all select n.id, n.parent_id, n.depth from nodes n join down on n.parent_id = down.id)"
        )
        patches: dict[str, list[tuple[int, str, str]]] = {}
        for node_id, seq, author, patch in self.db.execute(
            f"{down} select sp.node_id, sp.seq, sp.author, sp.patch from down d"
            " cross join scene_patches sp on sp.node_id = d.id order by sp.seq",  # cross: the subtree drives
            [top],
        ):
            patches.setdefault(node_id, []).append((seq, author, patch))
        nodes = self.db.execute(
            f"{down} select d.id, d.depth, (select p.scene_at from nodes p where p.id = d.parent_id), n.story_id"
            " from down d join nodes n on n.id = d.id"
            " where exists (select 1 from scene_patches sp where sp.node_id = d.id) order by d.depth",
            [top],
        ).fetchall()
        states: dict[str, tuple[SceneSnapshot, Roster]] = {}
        rows = []
        for node_id, depth, base_id, story_id in nodes:
            if node_id == top:
                base = self.at(base_id) if base_id else None
                snapshot, roster = (base.snapshot, base.roster) if base else (SceneSnapshot(), Roster())
            else:
                snapshot, roster = states[base_id]
            for _, author, patch in patches[node_id]:  # only the user may edit the roster directly
                result = apply_patch(snapshot, roster, json.loads(patch), allow_roster=author == "user")
                snapshot, roster = result.snapshot, result.roster
            states[node_id] = (snapshot, roster)
            first_seq = patches[node_id][0][0]
            state, listed = _dumps(snapshot.to_dict()), _dumps(roster.to_dict())
            rows.append((node_id, story_id, depth, state, listed, len(patches[node_id]), first_seq))
        self.db.conn.executemany(
            "insert into scenes (node_id, story_id, depth, state, roster, patches, seq) values (?, ?, ?, ?, ?, ?, ?)"
            " on conflict(node_id) do update set state = excluded.state, roster = excluded.roster,"
            " patches = excluded.patches",
            rows,
        )

    # --- reading ------------------------------------------------------------------------------

    def at(self, node_id: str, db: sqlite_utils.Database | None = None) -> SceneAt | None:
        """The scene at a node, or None when nothing on its path was ever patched."""
        return self.lookup(node_id, db)[1]

    def lookup(self, node_id: str, db: sqlite_utils.Database | None = None) -> tuple[bool, SceneAt | None]:
        """(whether the read models know the node yet, the scene at it)."""
        row = (
            (db or self.db)
            .execute(
                "select s.node_id, s.state, s.roster, s.patches from nodes n left join scenes s on s.node_id = n.scene_at"
                " where n.id = ?",
                [node_id],
            )
            .fetchone()
        )
        if row is None:
            return False, None
        if row[0] is None:
            return True, None
        snapshot, roster = SceneSnapshot.from_dict(json.loads(row[1])), Roster.from_dict(json.loads(row[2]))
        return True, SceneAt(row[0], snapshot, roster, row[3])


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
