"""The summary layers of a path rendered for the context: the digest, then the episodes (each labelled
with its turns), then the anchors (starred nodes inside the summarized part, quoted word for word); before them all, the
recap of an earlier story the story was started from (`carry_from`).
They make one user message at the start, opened with 【前情提要】 (in the story's language) and a line
saying it is established fact. The digest opens with the character's identity anchor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from domain.card.anchor import ANCHOR_TEXTS
from domain.texts import ContextTexts
from domain.tree.rules.compaction import Layers
from domain.values import NodeView, Prelude


@dataclass(frozen=True, slots=True)
class SummaryBlock:
    what: str  # digest | episode | anchors
    why: str
    text: str
    node_ids: tuple[UUID, ...]
    covers: tuple[int, int] | None  # the depth range of the path it stands for
    version: int | None = None  # the resident summary: the version of the card's memory it is from


def summary_blocks(
    layers: Layers,
    load: Callable[[UUID], NodeView],
    char: str,
    user: str,
    fill: Callable[[str, str, str], str],
    texts: ContextTexts,
    prelude: Prelude | None = None,
    identity: str = "",
) -> list[SummaryBlock]:
    """The blocks in order; `identity`: the character's identity anchor, word for word at the head of the
    digest (a fold can drop anything of the story, never who the character is)."""
    blocks: list[SummaryBlock] = []
    if prelude is not None:  # what an earlier story left: before anything of this one
        why = f"carried over: the recap of story {prelude.from_story_id}, read up to its node {prelude.from_node_id}"
        text = f"{texts.prelude_heading}\n{fill(prelude.text.strip(), char, user)}"
        blocks.append(SummaryBlock("prelude", why, text, (prelude.from_node_id,), None))
    anchors: list[UUID] = []
    if layers.digest is not None:
        node, digest = layers.digest
        why = (  # `covers` counts depths: the why names them first, then the turns they hold
            f"story digest: depths 0–{node.depth}, turns 0–{digest.last_turn} "
            f"({digest.author}{', edited' if digest.edited else ''})"
        )
        text = digest.text(texts.digest_headings)
        if identity.strip():
            heading = ANCHOR_TEXTS[texts.language].heading.format(char=char)
            text, why = (
                f"{heading}\n{fill(identity.strip(), char, user)}\n\n{text}",
                f"{why}, opened by the identity anchor",
            )
        blocks.append(SummaryBlock("digest", why, text, (node.id,), (0, node.depth)))
        anchors += digest.anchors
    for node, episode in layers.episodes:
        label = texts.episode_label.format(first=episode.first_turn, last=episode.last_turn)
        why = (
            f"episode: depths {episode.start_depth}–{node.depth}, turns {episode.first_turn}–{episode.last_turn} "
            f"({episode.author}{', edited' if episode.edited else ''})"
        )
        blocks.append(
            SummaryBlock("episode", why, f"{label}\n{episode.text}", (node.id,), (episode.start_depth, node.depth))
        )
        anchors += episode.anchors
    quoted = []
    for anchor_id in dict.fromkeys(anchors):
        anchor = load(anchor_id)
        if anchor.hidden or not anchor.text.strip():
            continue
        speaker = user if anchor.kind == "user" else char
        quoted.append(
            (anchor, texts.anchor_line.format(turn=anchor.turn, speaker=speaker, text=fill(anchor.text, char, user)))
        )
    if quoted:
        why = "anchors: starred nodes inside the summarized turns, word for word"
        text = texts.anchors + "\n" + "\n".join(line for _, line in quoted)
        blocks.append(SummaryBlock("anchors", why, text, tuple(a.id for a, _ in quoted), None))
    if blocks:
        first = blocks[0]
        blocks[0] = SummaryBlock(
            first.what, first.why, f"{texts.summary_opener}\n\n{first.text}", first.node_ids, first.covers
        )
    return blocks
