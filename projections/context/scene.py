"""The scene in the prompt: the 【世界状态】 and 【登场名录】 blocks (Liyuan's format), and the tail of the last
user message they go into, before the card's post-history instructions and the user's words."""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from domain.rules.scene import CharacterState, Roster, SceneSnapshot
from projections.context.records import TailBlock
from projections.read_models.scenes import SceneAt

ROSTER_LABELS: Mapping[str, str] = {"characters": "人物", "places": "地点", "items": "物品", "events": "剧情线"}
ROSTER_SECTION_BUDGET = 1200
EMPTY_STATE = "（尚无记录）"
EMPTY_ROSTER = "（尚无登记）"


def tail_blocks(scene: SceneAt | None, instructions: str) -> list[TailBlock]:
    """The tail blocks in their order: 【世界状态】, 【登场名录】, then the card's post-history instructions."""
    out = []
    if scene is not None:
        source = (UUID(scene.source_id),)
        why = f"the scene at this point of the path: {scene.patches} patch(es) folded up to node {scene.source_id}"
        out.append(TailBlock("scene", why, f"【世界状态】\n{format_state(scene.snapshot)}", source))
        why = "everything that has appeared so far, with its first in-story time"
        out.append(TailBlock("roster", why, f"【登场名录】{format_roster(scene.roster)}", source))
    if instructions:
        out.append(TailBlock("instructions", "card post-history instructions", instructions))
    return out


def format_state(snapshot: SceneSnapshot) -> str:
    """The body of the 【世界状态】 block."""
    lines = [f"时间：{snapshot.time}"] if snapshot.time else []
    if snapshot.location:
        lines.append(f"地点：{snapshot.location}")
    lines += [_character_line(name, c, snapshot.location) for name, c in snapshot.characters.items()]
    if snapshot.inventory:
        lines.append("物品：" + "、".join(snapshot.inventory))
    lines += [f"{key}：{value}" for key, value in snapshot.flags.items()]
    if snapshot.plot_threads:
        lines.append("剧情线：" + " ".join(f"「{thread}」" for thread in snapshot.plot_threads))
    return "\n".join(lines) or EMPTY_STATE


def _character_line(name: str, character: CharacterState, location: str) -> str:
    parts = [f"好感 {character.affinity}"]
    if character.status:
        parts.append(f"状态：{character.status}")
    if character.at:
        parts.append("在场" if character.at == location else f"在：{character.at}")
    if character.notes:
        parts.append(f"备注：{character.notes}")
    return f"{name}：" + "；".join(parts)


def format_roster(roster: Roster) -> str:
    """The body of the 【登场名录】 block."""
    sections = [_roster_section(ROSTER_LABELS[table], entries) for table, entries in roster.tables().items()]
    return "；".join(section for section in sections if section) or EMPTY_ROSTER


def _roster_section(label: str, entries: Mapping[str, str]) -> str:
    if not entries:
        return ""
    full = f"{label}：" + "、".join(f"{name}（{time}）" if time else name for name, time in entries.items())
    return full if len(full) <= ROSTER_SECTION_BUDGET else f"{label}：" + "、".join(entries)
