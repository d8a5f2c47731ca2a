"""A card's memory brought up to date with its stories: each live story whose current path changed since
its recap is recapped, a deleted story is forgotten and a restored one remembered (one the user asked to
forget stays forgotten), and the recaps are merged when a merge is due. The recaps and the merge are the
offline rules' (`domain/memory/recaps.py`, `offline_merge.py`): the whole pipeline runs with no model.
`sync` is a domain call: it runs where commands run (the service's executor)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from domain.application import Changji
from domain.memory.card_memory import Usage
from domain.memory.offline_merge import offline_merge
from domain.memory.recaps import offline_recap
from domain.tree.recap_source import path_for_recap
from projections.read_models.store import ReadModels

STORIES_PER_CARD = 10_000  # listed per sync (a card's stories, live and deleted)


@dataclass(frozen=True, slots=True)
class Synced:
    recapped: int
    forgotten: int
    remembered: int
    merged: bool
    position: int  # the notification position of the last event saved (0: none)


class CardMemorySync:
    def __init__(self, app: Changji, store: ReadModels) -> None:
        self.app, self.store = app, store

    def sync(self, tenant_id: str, card_id: UUID) -> Synced:
        app = self.app
        card = app.card(tenant_id, card_id)
        rows = {
            deleted: self.store.list_rows("stories", tenant_id, 0, STORIES_PER_CARD, deleted, card_id=str(card.id))
            for deleted in (0, 1)
        }
        recapped = forgotten = remembered = position = 0
        memory = app.memory.of(card.id)
        for row in rows[1]:
            story_id = UUID(row["id"])
            if memory is not None and story_id in memory.recaps and story_id not in memory.forgotten:
                position = max(position, app.memory.forget_story(card.id, story_id, "deleted"))
                forgotten += 1
        for row in rows[0]:
            story = app.story(tenant_id, UUID(row["id"]))
            if memory is not None and story.id in memory.forgotten:
                if story.id in memory.asked:
                    continue
                position = max(position, app.memory.remember_story(card.id, story.id))
                remembered += 1
            settings = app.settings(story)
            source = path_for_recap(story, app.node, card.data.name, settings.user_name)
            if source is None or not (source.digest or source.episodes or source.recent):
                continue
            if memory is not None and memory.recapped(story.id, source.fingerprint):
                continue
            title = story.title or f"{card.data.name} · {story.created_on:%Y-%m-%d}"
            text = offline_recap(title, source.digest, source.episodes, app.language(story), source.recent)
            written = app.memory.record_recap(
                tenant_id, card.id, story.id, text, source.fingerprint, (source.first_node_id, source.last_node_id),
                source.turns, source.omitted_chars, "offline", Usage(),
            )  # fmt: skip
            recapped += written.value
            position = max(position, written.position)
            memory = app.memory.of(card.id)
        memory = app.memory.of(card.id)
        merged = False
        if memory is not None and memory.merge_due:
            recaps = memory.remembered
            order = sorted(recaps, key=lambda s: (recaps[s].written_at, str(s)))
            language = card.data.language(card.settings.language)
            handbook, resident = offline_merge(
                {s: r.text for s, r in recaps.items()}, order, language, keep=memory.users_items
            )
            done = app.memory.record_merge(card.id, handbook, resident, "offline", Usage(), memory.version)
            merged, position = done.value, max(position, done.position)
        return Synced(recapped, forgotten, remembered, merged, position)
