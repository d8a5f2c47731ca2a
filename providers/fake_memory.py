"""A side model for a card's memory, played by rules on the fake model server (tests, benchmarks, demos):
it answers the recap and merge prompts of `service/card_memory_prompts.py` the way a careful model would —
a recap of the five sections from the material it was given, a merge that keeps the handbook, adds each
new recap's block and tagged items, and writes a resident summary — so the whole pipeline runs through
the real client, the real HTTP calls and the real checks, with no hosted model.

    fake.fallback = memory_writer(fallback=other_writer)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from providers.fake_server import Step, Text

_RECAP = ("你为角色扮演故事写复盘", "You write the recap of a role-play story")
_MERGE = ("你维护", "You keep ")
_STORY = re.compile(r"^###\s*(?:故事|Story)\s*([0-9a-f]{8,32})\s*[：:]\s*(.*)$")
_SECTION = re.compile(r"^##\s*(.+?)\s*$")
_PLOT, _FACTS = ("剧情脉络", "Plot"), ("既定事实", "Established facts")
_LINE_CHARS, _FACT_LINES, _PLOT_CHARS = 160, 12, 1200
_ITEMS_CHARS = 6_000  # the items a merge keeps at most (the blocks take the rest of the handbook's cap)


def memory_writer(fallback: Callable[[Mapping[str, Any]], Step] | None = None) -> Callable[[Mapping[str, Any]], Step]:
    """The fake server's fallback for card-memory prompts; any other request goes to `fallback`."""

    def write(body: Mapping[str, Any]) -> Step:
        messages = body.get("messages", [])
        system = str(messages[0].get("content", "")) if messages else ""
        user = str(messages[-1].get("content", "")) if messages else ""
        if system.startswith(_RECAP):
            return Text(recap_answer(user, system.startswith(_RECAP[0])))
        if system.startswith(_MERGE) and ("记忆手册" in system or "memory handbook" in system):
            return Text(merge_answer(user, "记忆手册" in system))
        if fallback is None:
            return Text("")
        return fallback(body)

    return write


def recap_answer(material: str, zh: bool) -> str:
    """Five sections from the material: the plot from its summaries and its newest lines, its lines as facts."""
    lines = [line.strip() for line in material.splitlines() if line.strip() and not line.startswith(("【", "["))]
    said = [line for line in lines if "：" in line or ": " in line]
    plot = "\n".join(lines)[-_PLOT_CHARS:]
    facts = [f"- {line[:_LINE_CHARS]}" for line in said[-_FACT_LINES:]] or [
        "- " + (lines[0][:_LINE_CHARS] if lines else "")
    ]
    title = (said[0] if said else (lines[0] if lines else "…"))[:40]
    names = ("剧情脉络", "人物与关系", "既定事实", "未了之事", "用户的玩法偏好") if zh else (
        "Plot", "Characters and relationships", "Established facts", "Open threads", "The user's play preferences"
    )  # fmt: skip
    none = "无" if zh else "none"
    bodies = (plot or none, none, "\n".join(facts), none, none)
    return f"# {title}\n\n" + "\n\n".join(f"## {name}\n{text}" for name, text in zip(names, bodies, strict=True))


def merge_answer(material: str, zh: bool) -> str:
    """The handbook given, each new recap's block and its facts tagged with it (the oldest items dropped past
    a share of the handbook's cap, as a model told the cap would), then a resident summary."""
    handbook, recaps = (
        _part(material, ("【当前手册】", "[The handbook now]")),
        _part(material, ("【新的复盘】", "[New recaps]")),
    )
    blocks: dict[str, tuple[str, str]] = {}
    items: dict[str, list[str]] = {}
    block: str | None = None
    section: str | None = None
    for line in handbook.splitlines():
        opening = re.match(r"^#\s*(?:局|Story)\s*[：:]\s*(.*?)\s*[（(]\s*([0-9a-f]{8,32})\s*[）)]\s*$", line.strip())
        if opening:
            block, section = opening.group(2), None
            blocks[block] = (opening.group(1), "")
        elif line.startswith("# "):
            block, section = None, line[2:].strip()
        elif block is not None:
            title, text = blocks[block]
            blocks[block] = (title, f"{text}\n{line}".strip())
        elif section is not None and line.startswith("- "):
            items.setdefault(section, []).append(line)
    facts_section = "世界既定事实（跨局）" if zh else "Established facts (across stories)"
    word = "局" if zh else "story"
    story: str | None = None
    name: str | None = None
    plot: dict[str, list[str]] = {}
    for line in recaps.splitlines():
        opened = _STORY.match(line.strip())
        if opened:
            story = opened.group(1)
            blocks[story] = (opened.group(2).strip() or story, "")
            name = None
            continue
        heading = _SECTION.match(line.strip())
        if heading:
            name = heading.group(1)
            continue
        if story is None or not line.strip():
            continue
        if name in _PLOT:
            plot.setdefault(story, []).append(line.strip())
        elif name in _FACTS and line.startswith("- ") and line[2:].strip() not in ("无", "none"):
            items.setdefault(facts_section, []).append(f"{line.strip()} [{word}:{story}]")
    for told, lines in plot.items():
        blocks[told] = (blocks[told][0], "\n".join(lines)[:400])
    while (
        sum(len(line) for lines in items.values() for line in lines) > _ITEMS_CHARS
    ):  # (within the cap: the oldest go)
        longest = max(items, key=lambda section: len(items[section]))
        items[longest].pop(0)
    parts = []
    for tag, (title, text) in blocks.items():
        head = f"# 局：{title}（{tag}）" if zh else f"# Story: {title} ({tag})"
        parts.append(f"{head}\n{text}".rstrip())
    for section, lines in items.items():
        parts.append("\n".join([f"# {section}", *dict.fromkeys(lines)]))
    resident_lines, size = [], 0
    for line in (line for lines in items.values() for line in lines):
        words = re.sub(r"\s*\[(?:局|story)[:：][0-9a-f]+\]", "", line).strip()
        if size + len(words) + 1 > 1000:
            break
        resident_lines.append(words)
        size += len(words) + 1
    resident = "\n".join(resident_lines) or ("（无）" if zh else "(nothing yet)")
    return "\n\n".join(parts) + f"\n\n{'# 常驻摘要' if zh else '# Resident summary'}\n{resident}\n"


def _part(material: str, openers: tuple[str, str]) -> str:
    """The text after one of `openers` up to the next part's opener (a line starting with 【 or [)."""
    for opener in openers:
        at = material.find(opener)
        if at >= 0:
            rest = material[at + len(opener) :]
            end = re.search(r"\n(?:【|\[)(?!(?:局|story)[:：])", rest)
            return rest[: end.start()] if end else rest
    return ""
