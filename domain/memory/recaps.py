"""A story's recap: five sections under a one-line title, in the card's language, read back by their
canonical (Chinese) names whatever language they were written in; and the offline recap, assembled
from the story's own digest and episodes when no side model writes one."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from domain.language import Language

RECAP_SECTIONS = ("剧情脉络", "人物与关系", "既定事实", "未了之事", "用户的玩法偏好")  # canonical names
HEADINGS: dict[Language, Mapping[str, str]] = {
    "zh": {name: name for name in RECAP_SECTIONS},
    "en": dict(zip(RECAP_SECTIONS, ("Plot", "Characters and relationships", "Established facts",
                                    "Open threads", "The user's play preferences"), strict=True)),
}  # fmt: skip
NONE: dict[Language, str] = {"zh": "无", "en": "none"}
# the digest's sections (their canonical names, `domain.values.DIGEST_SECTIONS`) that stand for a recap's
FROM_DIGEST = {"剧情脉络": "前情提要", "人物与关系": "人物", "既定事实": "事实账", "未了之事": "承诺与伏笔"}
_CANONICAL = {heading.lower(): name for headings in HEADINGS.values() for name, heading in headings.items()}
_HEADING = re.compile(r"^#{2,3}\s*(.+?)\s*$")


def recap_sections(text: str) -> dict[str, str]:
    """A recap's sections by canonical name (those it has). Only the five sections' own headings start a
    section; any other heading inside one (a character's name, say) is part of it, and what comes before
    the first section is not part of any."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line.strip())
        name = _CANONICAL.get(heading.group(1).lower()) if heading is not None else None
        if name is not None:
            current = sections.setdefault(name, [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def recap_title(text: str) -> str:
    """The recap's one-line title: its first `# ` line, else its first line before any section ("" when
    it starts with a section)."""
    for line in (line.strip() for line in text.splitlines()):
        if line.startswith("# "):
            return line[2:].strip()
        if _HEADING.match(line):
            return ""
        if line:
            return line
    return ""


def offline_recap(
    title: str,
    digest: Mapping[str, str] | None,
    episodes: Sequence[str],
    language: Language,
    recent: Sequence[str] = (),
) -> str:
    """The recap the offline rules write: the story's digest sections where they stand for a recap's, its
    episodes (newest last) and then the lines no summary covers yet (`recent`) for its plot, and no play
    preference (the rules see no evidence of one)."""
    headings, none = HEADINGS[language], NONE[language]
    digest = digest or {}
    plot = [digest.get(FROM_DIGEST["剧情脉络"], "").strip(), *(e.strip() for e in episodes), "\n".join(recent)]
    bodies = {
        "剧情脉络": "\n\n".join(p for p in plot if p),
        **{name: digest.get(source, "").strip() for name, source in FROM_DIGEST.items() if name != "剧情脉络"},
        "用户的玩法偏好": "",
    }
    parts = [f"# {title.strip() or none}"]
    parts += [f"## {headings[name]}\n{bodies[name] or none}" for name in RECAP_SECTIONS]
    return "\n\n".join(parts) + "\n"
