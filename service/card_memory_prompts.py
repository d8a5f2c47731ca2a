"""What the side model is asked for a card's memory, in the card's language: a story's recap (five
sections under a title, the previous recap folded in), and a merge (the handbook with its tags and the
resident summary), with the checks an answer must pass before anything of it is kept."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from domain.language import Language
from domain.memory.handbook import (
    SECTIONS,
    TAG_WORD,
    Handbook,
    MemoryTextError,
    Tags,
    parse_handbook,
    render_handbook,
)
from domain.memory.offline_merge import HANDBOOK_CHARS
from domain.memory.recaps import HEADINGS, RECAP_SECTIONS, recap_sections
from domain.memory.resident import RESIDENT_CHARS

RECAP_INPUT_CHARS = 60_000  # what a recap reads at most (the oldest turns cut first: the summaries stand for them)
RECAP_CHARS = 12_000  # a recap's answer at most
RECAP_TOKENS, MERGE_TOKENS = 4_000, 16_000  # (a merge writes the whole handbook again: up to its cap)


@dataclass(frozen=True, slots=True)
class MemoryPrompts:
    recap_system: str  # {char} {user} {headings}
    merge_system: str  # {char} {user} {tag} {sections} {resident_heading} {resident_chars}
    previous_recap: str
    digest: str
    episodes: str
    transcript: str
    omitted: str  # {chars}
    handbook: str
    recaps: str
    recap_of: str  # {tag} {title}
    keep: str
    forgotten: str
    resident_heading: str


PROMPTS: Mapping[Language, MemoryPrompts] = {
    "zh": MemoryPrompts(
        recap_system=(
            "你为角色扮演故事写复盘。故事里{char}由模型扮演，{user}是用户。读下面给出的材料（本故事的摘要、"
            "分段摘要、最近的原文，和上一版复盘），写出这个故事到目前为止的复盘，供日后同一角色的新故事回忆。\n"
            "格式：第一行是“# ”加一句标题；然后依次五个小节，标题严格是：{headings}（每个用“## ”开头）。\n"
            "要求：只写材料里有的事，不编造；人物与关系写清谁和谁、什么关系；既定事实写成一行一条（“- ”开头）；"
            "未了之事写承诺、伏笔、没完成的事；用户的玩法偏好只写用户自己的话里能看出的偏好，没有证据就写“无”。"
            "上一版复盘里仍然成立的内容要保留。全文不超过 3000 字。"
        ),
        merge_system=(
            "你维护{char}的记忆手册：它记着{user}和{char}此前几个故事留下的东西。手册的格式：每个故事一块，"
            "标题行是“# 局：标题（标签号）”，下面是那个故事的要点；然后是跨局的小节，标题严格是：{sections}，"
            "小节里每行一条（“- ”开头），每条末尾带上支持它的故事的标签，如 {tag}；几个故事都支持的一条带几个标签。\n"
            "把新的复盘并进手册：更新或新增它们的故事块，把跨局小节的条目合并、去重、改写清楚；标签只能用给出的，"
            "每个给出的故事都要留在手册里；标明“保留”的条目一字不改地留下；手册全文不超过 {handbook_chars} 字。\n"
            "手册之后另起一行“{resident_heading}”，写常驻摘要：新故事开始时要让{char}记得的最要紧的事，"
            "不超过 {resident_chars} 字，不带标签。只输出手册和常驻摘要。"
        ),
        previous_recap="【上一版复盘】",
        digest="【本故事的摘要】",
        episodes="【分段摘要】",
        transcript="【最近的原文】",
        omitted="（更早的原文有 {chars} 字未给出，由上面的摘要代表）",
        handbook="【当前手册】",
        recaps="【新的复盘】",
        recap_of="### 故事 {tag}：{title}",
        keep="【保留：用户写的条目，一字不改】",
        forgotten="（以下故事已被遗忘，手册里不再有它们：{stories}）",
        resident_heading="# 常驻摘要",
    ),
    "en": MemoryPrompts(
        recap_system=(
            "You write the recap of a role-play story, in which the model plays {char} and the user is {user}. "
            "Read the material below (the story's summary, its episode summaries, its latest turns word for word, "
            "and the previous recap) and write a recap of the story so far, for a later story with the same "
            "character to remember it by.\n"
            "Format: a first line of '# ' and a one-line title; then five sections, headed exactly: {headings} "
            "(each opened with '## ').\n"
            "Write only what the material says; invent nothing. Characters and relationships: who is what to "
            "whom. Established facts: one per line, each opened with '- '. Open threads: promises, hints, what "
            "is unfinished. The user's play preferences: only what the user's own words show; with no evidence, "
            "write 'none'. Keep what still holds from the previous recap. At most 1,500 words."
        ),
        merge_system=(
            "You keep {char}'s memory handbook: what {user}'s earlier stories with {char} left. Its format: a "
            "block per story, headed '# Story: title (tag number)', with that story's main points; then the "
            "cross-story sections, headed exactly: {sections}, one item per line (opened with '- '), each item "
            "ending with the tags of the stories that support it, such as {tag}; an item several stories "
            "support carries each of their tags.\n"
            "Merge the new recaps into the handbook: update or add their story blocks, and merge, deduplicate "
            "and reword the cross-story items. Use only the tags given; keep every story given in the handbook; "
            "keep the items marked to keep word for word; keep the whole handbook within {handbook_chars} "
            "characters.\n"
            "After the handbook, on a line of its own, write '{resident_heading}' and the resident summary: what "
            "{char} most needs to remember when a new story begins, at most {resident_chars} characters, with "
            "no tags. Answer with the handbook and the resident summary only."
        ),
        previous_recap="[The previous recap]",
        digest="[The story's summary]",
        episodes="[Episode summaries]",
        transcript="[The latest turns, word for word]",
        omitted="({chars} characters of older turns are not given; the summaries above stand for them)",
        handbook="[The handbook now]",
        recaps="[New recaps]",
        recap_of="### Story {tag}: {title}",
        keep="[Keep: items the user wrote, word for word]",
        forgotten="(These stories are forgotten and no longer in the handbook: {stories})",
        resident_heading="# Resident summary",
    ),
}


def recap_messages(
    language: Language,
    char: str,
    user: str,
    previous: str | None,
    digest: Mapping[str, str] | None,
    episodes: Sequence[str],
    recent: Sequence[str],
    omitted_chars: int,
) -> list[dict[str, str]]:
    prompts, headings = PROMPTS[language], HEADINGS[language]
    names = (
        "、".join(headings[n] for n in RECAP_SECTIONS)
        if language == "zh"
        else ", ".join(f"'{headings[n]}'" for n in RECAP_SECTIONS)
    )
    parts = []
    if previous:
        parts.append(f"{prompts.previous_recap}\n{previous.strip()}")
    if digest:
        parts.append(f"{prompts.digest}\n" + "\n".join(f"## {k}\n{v}" for k, v in digest.items() if v.strip()))
    if episodes:
        parts.append(f"{prompts.episodes}\n" + "\n\n".join(episodes))
    if recent:
        lines = "\n".join(recent)
        if omitted_chars:
            lines = f"{prompts.omitted.format(chars=omitted_chars)}\n{lines}"
        parts.append(f"{prompts.transcript}\n{lines}")
    system = prompts.recap_system.format(char=char, user=user, headings=names)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def checked_recap(text: str | None, language: Language) -> str | None:
    """The side model's recap when it is usable (every section there, the plot not empty, within
    RECAP_CHARS), else None."""
    if text is None or len(text) > RECAP_CHARS:
        return None
    sections = recap_sections(text)
    if set(sections) != set(RECAP_SECTIONS) or not sections["剧情脉络"].strip():
        return None
    return text.strip() + "\n"


def merge_messages(
    language: Language,
    char: str,
    user: str,
    handbook: Handbook,
    tags: Tags,
    recaps: Mapping[UUID, tuple[str, str]],
    keep: Sequence[str],
    forgotten: Sequence[UUID],
) -> list[dict[str, str]]:
    """`recaps`: the changed recaps (title, text) by story; `keep`: the user's items, as the handbook
    renders them; `forgotten`: stories the program took out of `handbook` already."""
    prompts = PROMPTS[language]
    sep = "、" if language == "zh" else ", "
    some = next(iter(recaps), None) or next(iter(tags.short), None)
    tag = f"[{TAG_WORD[language]}:{tags.short[some]}]" if some is not None else f"[{TAG_WORD[language]}:1a2b3c4d]"
    system = prompts.merge_system.format(
        char=char, user=user, tag=tag, sections=sep.join(SECTIONS[language]),
        resident_heading=prompts.resident_heading, resident_chars=RESIDENT_CHARS, handbook_chars=HANDBOOK_CHARS,
    )  # fmt: skip
    parts = [f"{prompts.handbook}\n{render_handbook(handbook, tags, language).strip() or '-'}"]
    if forgotten:
        parts.append(prompts.forgotten.format(stories=sep.join(str(s) for s in forgotten)))
    if keep:
        parts.append(f"{prompts.keep}\n" + "\n".join(keep))
    given = [
        f"{prompts.recap_of.format(tag=tags.short[story], title=title)}\n{text.strip()}"
        for story, (title, text) in recaps.items()
    ]
    parts.append(f"{prompts.recaps}\n" + "\n\n".join(given))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


_RESIDENT_HEADING = re.compile(
    "^#[ \t]*(?:" + "|".join(re.escape(p.resident_heading.lstrip("# ")) for p in PROMPTS.values()) + ")[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)


def parsed_merge(text: str | None, tags: Tags, language: Language) -> tuple[Handbook, str]:
    """The handbook and the resident summary of a merge's answer; MemoryTextError when it is not usable
    (no resident summary, one over its size, or a handbook that does not parse against the card's tags)."""
    if text is None:
        raise MemoryTextError("the side model answered nothing")
    found = _RESIDENT_HEADING.search(text)
    if found is None:
        raise MemoryTextError("the merge's answer has no resident summary")
    handbook = parse_handbook(text[: found.start()], tags)
    size = len(render_handbook(Handbook((), handbook.items), tags, language))  # (a story's block is never dropped)
    if size > HANDBOOK_CHARS * 11 // 10:
        raise MemoryTextError(f"the merged handbook's items take {size} characters (at most {HANDBOOK_CHARS})")
    resident = text[found.end() :].strip()
    if not resident:
        raise MemoryTextError("the merge's resident summary is empty")
    if len(resident) > RESIDENT_CHARS * 11 // 10:
        raise MemoryTextError(f"the merge's resident summary is {len(resident)} characters (at most {RESIDENT_CHARS})")
    return handbook, resident
