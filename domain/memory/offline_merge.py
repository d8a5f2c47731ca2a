"""The merge the offline rules make when no side model does: deterministic, tagged, within the caps.

Each story gets a block (its recap's title and the start of its plot); the lines of its recaps'
characters, facts and play-preference sections become items tagged with it, and a line two stories'
recaps share (the same words, case and closing punctuation aside) becomes one item tagged with both.
Items supported by more stories come first; what passes the handbook's cap is left out, the blocks never.
The resident summary opens with its heading, names each story in a line with the start of its plot (the
stories share half of RESIDENT_CHARS), then takes items section by section, most supported first, while
they fit RESIDENT_CHARS."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from uuid import UUID

from domain.language import Language
from domain.memory.handbook import SECTION_KEYS, SECTIONS, Handbook, Item, StoryBlock, Tags, render_handbook
from domain.memory.recaps import NONE, recap_sections, recap_title
from domain.memory.resident import RESIDENT_CHARS

HANDBOOK_CHARS = 12_000  # the handbook's cap, by default
BLOCK_CHARS = 600  # of a story's plot in its block
ITEM_SECTIONS = {"人物与关系": "characters", "既定事实": "facts", "用户的玩法偏好": "preferences"}
RESIDENT_HEADING: dict[Language, str] = {
    "zh": "# 往局记忆（同一世界更早的几局）",
    "en": "# Earlier stories in this world",
}
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.、)])\s*")
_CLOSING = "。．.，,；;！!"


def offline_merge(
    recaps: Mapping[UUID, str],
    order: Sequence[UUID],
    language: Language,
    handbook_chars: int = HANDBOOK_CHARS,
    keep: Sequence[Item] = (),
) -> tuple[Handbook, str]:
    """The handbook and resident summary of the recaps (`order`: the stories oldest first; a story it does
    not name comes after those it does); `keep`: items a user wrote, kept first (tagged only with stories
    whose recaps are here, and left out when none is)."""
    stories = [story for story in order if story in recaps]
    stories += sorted((story for story in recaps if story not in stories), key=str)
    blocks = tuple(StoryBlock(s, recap_title(recaps[s]), _plot(recaps[s])) for s in stories)
    found: dict[tuple[str, str], tuple[str, list[UUID]]] = {}
    for story in stories:
        sections = recap_sections(recaps[story])
        for name, key in ITEM_SECTIONS.items():
            for line in _lines(sections.get(name, ""), language):
                _, sources = found.setdefault((key, _same(line)), (line, []))
                if story not in sources:
                    sources.append(story)
    tags = Tags(stories)
    items = [
        replace(item, sources=tuple(s for s in item.sources if s in recaps))
        for item in keep
        if any(s in recaps for s in item.sources)
    ]
    users = {(item.section, _same(item.text)) for item in items}
    for (key, same), (words, sources) in sorted(found.items(), key=lambda kv: -len(kv[1][1])):  # (stable)
        if (key, same) in users:
            continue
        candidate = Handbook(blocks, (*items, Item(key, words, tuple(sources))))
        if len(render_handbook(candidate, tags, language)) <= handbook_chars:
            items.append(candidate.items[-1])
    items.sort(key=lambda item: SECTION_KEYS.index(item.section))
    handbook = Handbook(blocks, tuple(items))
    return handbook, _resident(handbook, language)


def _plot(recap: str) -> str:
    plot = recap_sections(recap).get("剧情脉络", "")
    if len(plot) <= BLOCK_CHARS:
        return plot
    cut = plot[:BLOCK_CHARS]
    at = cut.rfind("\n")
    return (cut[:at] if at > BLOCK_CHARS // 2 else cut).rstrip() + "…"


def _lines(body: str, language: Language) -> list[str]:
    lines = [_BULLET.sub("", line).strip() for line in body.splitlines()]
    nothing = {NONE["zh"], NONE["en"], NONE[language]}
    return [line for line in lines if line and line.strip(_CLOSING).lower() not in nothing]


def _same(line: str) -> str:
    return line.strip().rstrip(_CLOSING).casefold()


def _resident(handbook: Handbook, language: Language) -> str:
    lines = [RESIDENT_HEADING[language]]
    size = len(lines[0])
    share = max(RESIDENT_CHARS // 2 // max(len(handbook.blocks), 1), 0)  # each story's line, of half the room
    for block in reversed(handbook.blocks):  # (the newest kept when not all fit, listed oldest first)
        line = f"- {block.title}"
        plot = " ".join(block.text.split())
        if plot and share > len(line) + 24:
            room = share - len(line) - 2
            line += ("：" if language == "zh" else ": ") + (plot if len(plot) <= room else plot[: room - 1] + "…")
        if size + len(line) + 1 > RESIDENT_CHARS // 2:
            break
        lines.insert(1, line)
        size += len(line) + 1
    for key, name in zip(SECTION_KEYS, SECTIONS[language], strict=True):
        picked = sorted((i for i in handbook.items if i.section == key), key=lambda i: -len(i.sources))
        section = [f"## {name}"]
        for item in picked:
            line = f"- {item.text}"
            if size + len(section[0]) + 1 + sum(len(s) + 1 for s in section[1:]) + len(line) + 1 > RESIDENT_CHARS:
                break
            section.append(line)
        if len(section) > 1:
            lines += section
            size += sum(len(s) + 1 for s in section)
    return "\n".join(lines)
