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
        """The card memory's resident summary and its version (None: the card has no memory yet)."""
        row = self.db.execute(
            "select resident, version from card_memories where card_id = ?", [str(card_id)]
        ).fetchone()
        return (str(row[0]), int(row[1])) if row else None

    def stories_to_recap(self, limit: int) -> list[dict[str, Any]]:
        """Live stories with a turn whose current path may have changed since their recap (or that have
        none): changed after it was written, or at another turn than it read, or forgotten at their
        deletion and restored since. A story whose recap the user wrote, or that the user asked to
        forget, is not. Each row: `story_id`, `card_id`, `tenant_id`, `updated_at`, `leaf_turn`, and
        `recap_turns` (the turn the recap read up to; None: no recap)."""
        return list(
            self.db.query(
                "select s.id as story_id, s.card_id, s.tenant_id, s.updated_at, n.turn as leaf_turn,"
                " r.turns as recap_turns from stories s join nodes n on n.id = s.leaf_id"
                " left join memory_recaps r on r.id = s.id"
                " where s.deleted = 0 and n.turn >= 1 and (r.id is null or (r.by_user = 0 and r.asked = 0 and"
                " (s.updated_at > r.written_at or n.turn != r.turns or r.forgotten = 1)))"
                " order by s.updated_at limit ?",
                [limit],
            )
        )

    def stories_to_forget(self, limit: int) -> list[dict[str, Any]]:
        """Deleted stories their card's memory still remembers: `story_id`, `card_id`, `tenant_id`."""
        return list(
            self.db.query(
                "select s.id as story_id, s.card_id, s.tenant_id from stories s join memory_recaps r on r.id = s.id"
                " where s.deleted = 1 and r.forgotten = 0 limit ?",
                [limit],
            )
        )

    def memories_to_merge(self, limit: int) -> list[dict[str, Any]]:
        """Card memories changed since their last merge: `card_id`, `tenant_id`, `changed_seq`."""
        return list(
            self.db.query(
                "select card_id, tenant_id, changed_seq from card_memories where changed_seq > merged_seq limit ?",
                [limit],
            )
        )
