"""The scene in the prompt: the 【世界状态】 and 【登场名录】 blocks (Liyuan's format, in the story's
language), and the tail of the last user message they go into, before the card's post-history
instructions and the user's words."""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from domain.texts import ContextTexts
from domain.tree.rules.scene import CharacterState, Roster, SceneSnapshot
from projections.context.records import TailBlock
from projections.read_models.scenes import SceneAt

ROSTER_SECTION_BUDGET = 1200


def tail_blocks(scene: SceneAt | None, instructions: str, texts: ContextTexts) -> list[TailBlock]:
    """The tail blocks in their order: 【世界状态】, 【登场名录】, then the card's post-history instructions."""
    out = []
    if scene is not None:
        source = (UUID(scene.source_id),)
        why = f"the scene at this point of the path: {scene.patches} patch(es) folded up to node {scene.source_id}"
        out.append(TailBlock("scene", why, f"{texts.world_state}\n{format_state(scene.snapshot, texts)}", source))
        why = "everything that has appeared so far, with its first in-story time"
        out.append(TailBlock("roster", why, f"{texts.roster}{format_roster(scene.roster, texts)}", source))
    if instructions:
        out.append(TailBlock("instructions", "card post-history instructions", instructions))
    return out


def format_state(snapshot: SceneSnapshot, texts: ContextTexts) -> str:
    """The body of the 【世界状态】 block."""
    lines = [texts.labelled(texts.time, snapshot.time)] if snapshot.time else []
    if snapshot.location:
        lines.append(texts.labelled(texts.place, snapshot.location))
    lines += [_character_line(name, c, snapshot.location, texts) for name, c in snapshot.characters.items()]
    if snapshot.inventory:
        lines.append(texts.labelled(texts.items, texts.list_sep.join(snapshot.inventory)))
    lines += [texts.labelled(key, value) for key, value in snapshot.flags.items()]
    if snapshot.plot_threads:
        threads = " ".join(texts.thread.format(text=thread) for thread in snapshot.plot_threads)
        lines.append(texts.labelled(texts.threads, threads))
    return "\n".join(lines) or texts.empty_state


def _character_line(name: str, character: CharacterState, location: str, texts: ContextTexts) -> str:
    parts = [texts.affinity.format(value=character.affinity)]
    if character.status:
        parts.append(texts.labelled(texts.status, character.status))
    if character.at:
        parts.append(texts.present if character.at == location else texts.labelled(texts.elsewhere, character.at))
    if character.notes:
        parts.append(texts.labelled(texts.notes, character.notes))
    return texts.labelled(name, texts.part_sep.join(parts))


def format_roster(roster: Roster, texts: ContextTexts) -> str:
    """The body of the 【登场名录】 block."""
    labels = texts.roster_labels
    sections = [_roster_section(labels[table], entries, texts) for table, entries in roster.tables().items()]
    return texts.part_sep.join(section for section in sections if section) or texts.empty_roster


def _roster_section(label: str, entries: Mapping[str, str], texts: ContextTexts) -> str:
    if not entries:
        return ""
    sep = texts.list_sep
    full = texts.labelled(
        label, sep.join(texts.first_seen.format(name=n, time=t) if t else n for n, t in entries.items())
    )
    return full if len(full) <= ROSTER_SECTION_BUDGET else texts.labelled(label, sep.join(entries))
