"""What the card memories' rows answer (`memory_rows.py`): a card's resident summary for its stories'
contexts, and the work its memory is due — stories changed since their recap, deleted stories still
remembered, restored ones still forgotten, memories changed since their merge."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import sqlite_utils


class MemoryQueries:
    @property
    def db(self) -> sqlite_utils.Database:
        raise NotImplementedError

    def resident_of(self, card_id: UUID) -> tuple[str, int] | None:
        """The card memory's resident summary and its version (None: the card has no memory yet); the
        summary is empty while a story forgotten since the last merge may still be in it."""
        row = self.db.execute(
            "select resident, version, forgetting from card_memories where card_id = ?", [str(card_id)]
        ).fetchone()
        return ("" if row[2] else str(row[0]), int(row[1])) if row else None

    def stories_to_recap(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Live stories of live cards, after `after` (their `seq`), with a turn, whose leaf is not being
        written, and whose current path may have changed since their card memory's recap of it (or that
        have none): changed after it was written, or ending at another node than it read, or forgotten at
        their deletion and restored since. A story whose recap the user wrote, or that the user asked to
        forget, is not. Each row: `story_id`, `card_id`, `tenant_id`, `updated_at`, `leaf_turn`,
        `recap_turns` (the turn the recap read up to; None: no recap) and `seq`."""
        return list(
            self.db.query(
                "select s.id as story_id, s.card_id, s.tenant_id, s.updated_at, s.seq, n.turn as leaf_turn,"
                " r.turns as recap_turns from stories s join cards c on c.id = s.card_id and c.deleted = 0"
                " join nodes n on n.id = s.leaf_id"
                " left join card_memories m on m.card_id = s.card_id"
                " left join memory_recaps r on r.id = s.id || ':' || m.id"
                " where s.seq > ? and s.deleted = 0 and n.turn >= 1 and n.phase not in ('writing', 'waiting')"
                " and (r.id is null or (r.by_user = 0 and r.asked = 0 and (s.updated_at > r.written_at"
                " or s.leaf_id is not r.leaf_id or r.forgotten = 1)))"
                " order by s.seq limit ?",
                [after, limit],
            )
        )

    def stories_to_forget(self, limit: int) -> list[dict[str, Any]]:
        """Deleted stories a live card's memory still remembers: `story_id`, `card_id` (the memory's),
        `tenant_id`, `seq` (the recap row's last change)."""
        return list(
            self.db.query(
                "select r.story_id, m.card_id, m.tenant_id, r.seq from memory_recaps r"
                " join card_memories m on m.id = r.memory_id join cards c on c.id = m.card_id and c.deleted = 0"
                " join stories s on s.id = r.story_id"
                " where r.forgotten = 0 and s.deleted = 1 limit ?",
                [limit],
            )
        )

    def memories_to_merge(self, limit: int) -> list[dict[str, Any]]:
        """Memories of live cards changed since their last merge: `card_id`, `tenant_id`, `changed_seq`."""
        return list(
            self.db.query(
                "select m.card_id, m.tenant_id, m.changed_seq from card_memories m join cards c on c.id = m.card_id"
                " and c.deleted = 0 where m.changed_seq > m.merged_seq limit ?",
                [limit],
            )
        )
