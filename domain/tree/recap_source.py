"""What a story's current path gives its card's memory: the fingerprint of what a recap of it would read
(a recap is written once per fingerprint), the span of the path, its turns, its summary layers, and the
turns no summary covers yet, hidden ones left out."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from domain.tree.rules.compaction import layers_from, uncovered
from domain.tree.rules.paths import walk_up
from domain.tree.story import Story
from domain.values import NodeView

RECENT_CHARS = 4_000  # of the turns no summary covers yet, the newest kept for the recap


@dataclass(frozen=True, slots=True)
class PathForRecap:
    story_id: UUID
    fingerprint: str
    first_node_id: UUID | None
    last_node_id: UUID | None
    turns: int
    digest: dict[str, str] | None  # the digest's sections by canonical name
    episodes: tuple[str, ...]  # oldest first
    recent: tuple[str, ...]  # `speaker：words` lines after the summaries, oldest first
    omitted_chars: int  # of those lines, what recent_chars left out


def path_for_recap(
    story: Story, load: Callable[[UUID], NodeView], char: str, user: str, recent_chars: int = RECENT_CHARS
) -> PathForRecap | None:
    """What the story's current path gives a recap (None: a story with no leaf yet): of the turns no
    summary covers, the newest `recent_chars` word for word."""
    if story.leaf_id is None:
        return None
    leaf = load(story.leaf_id)
    below, boundary = uncovered(walk_up(load, leaf.id))
    layers = layers_from(boundary, load)
    summaries = [node for node, _ in layers.episodes] + ([layers.digest[0]] if layers.digest else [])
    read = sorted(((n.id, n.version) for n in (*summaries, *below)), key=str)
    fingerprint = hashlib.sha256(repr((leaf.id, read)).encode()).hexdigest()[:32]
    lines: list[str] = []
    size = omitted = 0
    for node in reversed(below):
        if node.hidden or not node.text.strip():
            continue
        line = f"{user if node.kind == 'user' else char}：{node.text.strip()}"
        if size >= recent_chars:
            omitted += len(line)
            continue
        if size + len(line) > recent_chars:  # (the newest that does not fit whole: its start, then no more)
            omitted += len(line) - (recent_chars - size)
            line = line[: recent_chars - size] + "…"
        lines.append(line)
        size += len(line)
    first = below[0].id if below else (summaries[-1].id if summaries else leaf.id)
    return PathForRecap(
        story.id,
        fingerprint,
        story.root_id if layers.digest or layers.episodes else first,
        leaf.id,
        leaf.turn,
        dict(layers.digest[1].sections) if layers.digest else None,
        tuple(episode.text for _, episode in layers.episodes),
        tuple(reversed(lines)),
        omitted,
    )
