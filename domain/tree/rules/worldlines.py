"""World lines: where a new save point goes (extend a line, or fork a new one). Pure rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

from domain.values import SavePoint

MAIN_LINE = "主线"


@dataclass(frozen=True, slots=True)
class SavePlan:
    worldline_id: str
    worldline_name: str
    parent_save_id: str | None
    fork_from_save_id: str | None


def plan_save(
    saves: Sequence[SavePoint],
    on_path: Callable[[UUID], bool],
    descends_from: Callable[[UUID, UUID], bool],
    new_line_id: str,
) -> SavePlan:
    """Place a save at the current path's end.

    `saves` are ordered oldest first; `on_path(node)` tells whether a node is on the path being saved;
    `descends_from(node, ancestor)` whether `ancestor` is an ancestor-or-self of `node`.
    """
    prev = next((s for s in reversed(saves) if on_path(s.node_id)), None)
    if prev is None:
        return SavePlan(new_line_id, MAIN_LINE, None, None)
    diverged = any(s.id != prev.id and not on_path(s.node_id) and descends_from(s.node_id, prev.node_id) for s in saves)
    if diverged:
        forks = {s.worldline_id for s in saves if s.fork_from_save_id == prev.id}
        return SavePlan(new_line_id, f"从「{prev.name}」分出 · 线{len(forks) + 2}", prev.id, prev.id)
    return SavePlan(prev.worldline_id, prev.worldline_name, prev.id, prev.fork_from_save_id)
