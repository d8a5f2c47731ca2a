"""Card memories → read-model rows (pure; folded with the other rows of a batch, `rows.RowChanges`).

`card_memories`: one row per card's memory — its version, its resident summary (what every context of
the card's stories reads, one row away; not read while a story forgotten since the last merge may still be
in it: `forgetting`), and the positions of its last change a merge must read
(`changed_seq`) and of its last merge (`merged_seq`): a memory whose change is newer than its merge is
due a merge (the sweep asks the aggregate, which decides). `memory_recaps`: one row per recapped story and memory —
the version, the turn and the node it read up to, when it was written, whether the user wrote it, whether
the story is forgotten — which the sweep compares with the `stories` rows to find the stories due a recap."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.memory.events import (
    CardMemoryBegun,
    HandbookEdited,
    MemoryMerged,
    RecapEdited,
    RecapWritten,
    ResidentEdited,
    StoryForgotten,
    StoryRemembered,
)

Row = dict[str, Any]
MEMORY_TABLES = ("card_memories", "memory_recaps")


def create_memory_tables(db: Any) -> None:
    """The tables (`db`: a sqlite-utils Database), if not there yet."""
    db.table("card_memories").create(
        {
            "id": str, "card_id": str, "tenant_id": str, "version": int, "resident": str, "forgetting": int,
            "changed_seq": int, "merged_seq": int, "merges": int, "updated_at": str, "seq": int,
        },
        pk="id", if_not_exists=True,
    )  # fmt: skip
    db.table("card_memories").create_index(["card_id"], unique=True, if_not_exists=True)
    db.table("memory_recaps").create(  # id: `<story id>:<memory id>` (a story moved to another card has a recap in each)
        {
            "id": str, "story_id": str, "memory_id": str, "version": int, "turns": int, "leaf_id": str,
            "by_user": int, "forgotten": int, "asked": int, "written_at": str, "seq": int,
        },
        pk="id", if_not_exists=True,
    )  # fmt: skip
    db.table("memory_recaps").create_index(["memory_id"], if_not_exists=True)
    db.table("memory_recaps").create_index(["story_id"], if_not_exists=True)


def _ts(when: datetime) -> str:
    return when.isoformat()


class MemoryRows:
    """The card memories' part of a batch's row changes (mixed into `RowChanges`, whose `_update` and
    `inserts` it writes through)."""

    inserts: defaultdict[str, list[Row]]
    updates: defaultdict[str, defaultdict[str, Row]]
    increments: defaultdict[str, defaultdict[str, Counter[str]]]

    def _memory(self, e: Any, seq: int, changed: bool = True, **columns: Any) -> None:
        if changed:
            columns["changed_seq"] = seq
        row = self.updates["card_memories"][str(e.originator_id)]
        row.update(version=e.originator_version, updated_at=_ts(e.timestamp), **columns)

    def _recap(self, e: Any, story_id: UUID, **columns: Any) -> None:
        self.updates["memory_recaps"][f"{story_id}:{e.originator_id}"].update(columns)

    def _on_card_memory_begun(self, e: CardMemoryBegun, seq: int) -> None:
        self.inserts["card_memories"].append(
            {
                "id": str(e.originator_id), "card_id": str(e.card_id), "tenant_id": e.tenant_id,
                "version": e.originator_version, "resident": "", "forgetting": 0, "changed_seq": 0, "merged_seq": 0,
                "merges": 0,
                "updated_at": _ts(e.timestamp), "seq": seq,
            }
        )  # fmt: skip

    def _on_recap_written(self, e: RecapWritten, seq: int) -> None:
        leaf = str(e.last_node_id) if e.last_node_id is not None else None
        if e.version == 1:  # (the story's first recap in this memory: its row)
            self.inserts["memory_recaps"].append(
                {
                    "id": f"{e.story_id}:{e.originator_id}", "story_id": str(e.story_id),
                    "memory_id": str(e.originator_id), "version": 1, "turns": e.turns, "leaf_id": leaf, "by_user": 0,
                    "forgotten": 0, "asked": 0, "written_at": _ts(e.timestamp), "seq": seq,
                }
            )  # fmt: skip
        else:
            self._recap(
                e, e.story_id, version=e.version, turns=e.turns, leaf_id=leaf, written_at=_ts(e.timestamp), seq=seq
            )
        self._memory(e, seq)

    def _on_recap_edited(self, e: RecapEdited, seq: int) -> None:
        self._recap(e, e.story_id, version=e.version, by_user=1, seq=seq)
        self._memory(e, seq)

    def _on_memory_merged(self, e: MemoryMerged, seq: int) -> None:
        self._memory(e, seq, changed=False, resident=e.resident, merged_seq=seq, forgetting=0)
        self.increments["card_memories"][str(e.originator_id)]["merges"] += 1

    def _on_handbook_edited(self, e: HandbookEdited, seq: int) -> None:
        self._memory(e, seq, changed=False)

    def _on_resident_edited(self, e: ResidentEdited, seq: int) -> None:
        self._memory(e, seq, changed=False, resident=e.text, forgetting=0)

    def _on_story_forgotten(self, e: StoryForgotten, seq: int) -> None:
        self._recap(e, e.story_id, forgotten=1, asked=int(e.reason == "asked"), seq=seq)
        self._memory(e, seq, forgetting=1)  # (its resident summary may say what is forgotten: not shown till merged)

    def _on_story_remembered(self, e: StoryRemembered, seq: int) -> None:
        self._recap(e, e.story_id, forgotten=0, asked=0, seq=seq)
        self._memory(e, seq)
