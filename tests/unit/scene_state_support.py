"""A sample scene, and `patched` to apply a scribe's patch to it, for the scene-state tests."""

from __future__ import annotations

from typing import Any

from domain.tree.rules.scene import CharacterState, PatchResult, Roster, SceneSnapshot, apply_patch

EMPTY = SceneSnapshot()
KNOWN = ["沈砚", "Alice"]
SHEN = CharacterState(affinity=10, status="疲惫", notes="答应修灯", at="灯塔")
SCENE = SceneSnapshot(
    time="第二天清晨",
    location="灯塔",
    characters={"沈砚": SHEN},
    inventory=("黄铜怀表（User持有）",),
    flags={"天气": "大雾"},
    plot_threads=("灯为何熄灭",),
)


def patched(patch: dict[str, Any], snapshot: SceneSnapshot = SCENE, **kwargs: Any) -> PatchResult:
    return apply_patch(snapshot, Roster(), patch, KNOWN, **kwargs)
