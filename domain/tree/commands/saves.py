"""Save points and world lines: mark a save (extending a line or forking one), delete, rename, restore."""

from __future__ import annotations

from uuid import UUID

from domain.aggregates import CommandGroup, Written
from domain.ports import TreeIndex
from domain.tree.commands.base import TreeAggregates
from domain.tree.rules.worldlines import plan_save
from domain.values import SavePoint


class SaveCommands(CommandGroup[TreeAggregates]):
    def mark_save(
        self, tenant_id: str, story_id: UUID, save_id: str, name: str, node_id: UUID | None, tree: TreeIndex
    ) -> Written[SavePoint]:
        story = self.app.story(tenant_id, story_id)
        target = self.app.leaf_or(story, node_id).id
        saves = sorted(story.saves.values(), key=lambda s: s.created_at)
        shallowest = min((self.app.node(s.node_id).depth for s in saves), default=0)
        path = tree.path_ids(target, shallowest)  # one walk, however many saves there are
        plan = plan_save(
            saves,
            on_path=lambda n: n in path,
            descends_from=lambda n, a: tree.is_ancestor(a, n),
            new_line_id=save_id,
        )
        with self.app.evicting(story):
            story.mark_save(save_id, name, target, plan)
            return Written(story.saves[save_id], self.app.commit(story))

    def delete_save(self, tenant_id: str, story_id: UUID, save_id: str) -> int:
        story = self.app.story(tenant_id, story_id)
        with self.app.evicting(story):
            story.delete_save(save_id)
            return self.app.commit(story)

    def rename_worldline(self, tenant_id: str, story_id: UUID, worldline_id: str, name: str) -> int:
        story = self.app.story(tenant_id, story_id)
        with self.app.evicting(story):
            story.rename_worldline(worldline_id, name)
            return self.app.commit(story)

    def restore_save(self, tenant_id: str, story_id: UUID, save_id: str) -> int:
        story = self.app.story(tenant_id, story_id)
        save = story.save_point(save_id)
        with self.app.evicting(story):
            story.move_leaf(save.node_id, cause="restore")
            return self.app.commit(story)
