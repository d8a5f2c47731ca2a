"""The summarizers' requests to the side model, in Chinese and in English (the story's language).

A digest is stored under the canonical section names (`DIGEST_SECTIONS`); an English digest is asked
for under English headings, and either language's headings are read back to the canonical names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from domain.language import Language
from domain.texts import CONTEXT_TEXTS
from domain.values import DIGEST_SECTIONS


@dataclass(frozen=True, slots=True)
class SummaryPrompts:
    episode: str
    digest: str  # {user} {chars} {sections}
    transcript: str  # {first} {last}
    ledger: str
    previous: str
    episodes: str
    episode_label: str  # {first} {last}
    latest: str
    ask_digest: str
    said: str  # {speaker} {text}
    nothing: str
    guidance: Mapping[str, str]  # per canonical section: what it holds
    rejected: str  # {reasons}: a summary that failed its checks, asked for again
    failures: Mapping[str, str]  # per check's failure code: the reason, in words ({length} {most} {sections}…)


_ZH = SummaryPrompts(
    episode="""你是一场长篇角色扮演的场记，为其中一段剧情写接力摘要。这份摘要将取代这段原文，是后来的演员了解这段剧情的唯一依据。

要求：
- 按时间顺序写清楚谁做了什么、结果如何，保留故事内的时间标记、地点、人名（照原文写法）；
- 每一个承诺、约定、线索、悬而未决的问题都要记下；物品归属、伤势、重要数字不能丢；
- 只写发生过的事，不评论、不发挥、不续写；
- 【账本快照】只是辅助参考，可能滞后，与对话原文冲突时以原文为准；
- 直接输出摘要正文，不超过 500 字，不要标题。""",
    digest="""你是一场长篇角色扮演的场记，要把【旧摘要】和新的【分段摘要】合并成一份接力摘要，它是演员了解更早剧情的唯一依据。

用下面五个二级标题输出，顺序不变：
{sections}

规则：合并旧摘要时不得丢掉其中的承诺、线索和事实；只写发生过的事，不发明、不评论、不续写；人名照原文写法；【账本快照】只是辅助参考，与原文冲突时以原文为准。五节合计不超过 {chars} 字，越早的事写得越概括。只输出这五节。""",
    transcript="【对话记录 · 第{first}–{last}轮】",
    ledger="【账本快照（辅助，可能滞后）】",
    previous="【旧摘要】",
    episodes="【分段摘要】",
    episode_label="### 第{first}–{last}轮",
    latest="【最近原文】",
    ask_digest="请输出合并后的五节摘要。",
    said="{speaker}：{text}",
    nothing="（这段没有可记的内容。）",
    guidance={
        "前情提要": "按时间顺序的关键事件（谁做了什么、结果如何），保留故事内时间。",
        "人物": "每个人物：性格要点、说话习惯、怎么称呼{user}、与{user}关系的温度和走向。",
        "承诺与伏笔": "所有尚未兑现的承诺、只提过一次的线索、悬而未决的问题，宁多勿少。",
        "事实账": "物品归属、伤势与身体状况、重要数字、时间线（故事里的第几天）。",
        "当前场景": "此刻：哪一天、什么时辰、在哪里、谁在场、正在做什么。必须跟随【最近原文】里最新的场景。",
    },
    rejected="这份摘要没有通过检查：{reasons}。请按原来的要求重新写一份完整的摘要，只输出摘要本身。",
    failures={
        "short": "太短（{length} 字）",
        "long": "太长（{length} 字，最多 {most} 字）",
        "missing": "缺少这些小节：{sections}",
        "empty": "这些小节是空的：{sections}",
        "banned": "出现了角色卡禁止的写法（「{pattern}」）",
        "scene": "「当前场景」没有跟随【最近原文】里最新的场景",
        "strangers": "「人物」里有原文中没有出现过的名字：{names}",
    },
)

_EN = SummaryPrompts(
    episode="""You are the scribe of a long role-play, writing the relay summary of one stretch of it. The summary replaces the original text: it is all the actors who come later will know of this stretch.

Requirements:
- In time order, say who did what and how it turned out; keep the in-story time markers, places and names (spelled as in the text);
- Record every promise, agreement, clue and open question; never lose who holds what, injuries or important numbers;
- Write only what happened: no comments, no embellishment, no continuation;
- [LEDGER SNAPSHOT] is only an aid and may lag behind: where it conflicts with the dialogue, the dialogue wins;
- Output the summary text directly, at most 350 words, with no title.""",
    digest="""You are the scribe of a long role-play. Merge [PREVIOUS DIGEST] and the new [EPISODE SUMMARIES] into one relay summary: it is all the actors will know of the earlier story.

Answer under these five second-level headings, in this order:
{sections}

Rules: when merging the previous digest, lose none of its promises, clues and facts; write only what happened, invent nothing, comment on nothing, continue nothing; spell names as in the text; [LEDGER SNAPSHOT] is only an aid and where it conflicts with the text, the text wins. At most {chars} characters for all five sections together; the earlier the events, the more briefly. Output only these five sections.""",
    transcript="[TRANSCRIPT · turns {first}–{last}]",
    ledger="[LEDGER SNAPSHOT (an aid; may lag behind)]",
    previous="[PREVIOUS DIGEST]",
    episodes="[EPISODE SUMMARIES]",
    episode_label="### Turns {first}–{last}",
    latest="[LATEST TEXT]",
    ask_digest="Output the merged five-section digest.",
    said="{speaker}: {text}",
    nothing="(Nothing in this stretch to record.)",
    guidance={
        "前情提要": "The key events in time order (who did what, how it turned out), with in-story times.",
        "人物": "Each character: personality, way of speaking, how they address {user}, the warmth and direction of "
        "their relationship with {user}.",
        "承诺与伏笔": "Every promise not yet kept, every clue mentioned only once, every open question; more rather "
        "than fewer.",
        "事实账": "Who holds what, injuries and health, important numbers, the timeline (which day of the story).",
        "当前场景": "Right now: which day, what hour, where, who is present, what is going on. Must follow the latest "
        "scene in [LATEST TEXT].",
    },
    rejected="This summary did not pass its checks: {reasons}. Write the whole summary again as first asked, and"
    " output only the summary.",
    failures={
        "short": "too short ({length} characters)",
        "long": "too long ({length} characters, at most {most})",
        "missing": "these sections are missing: {sections}",
        "empty": "these sections are empty: {sections}",
        "banned": 'a pattern the character card forbids appeared ("{pattern}")',
        "scene": "Current scene does not follow the latest scene in [LATEST TEXT]",
        "strangers": "Characters names someone who appears nowhere in the text: {names}",
    },
)

SUMMARY_PROMPTS: Mapping[Language, SummaryPrompts] = {"zh": _ZH, "en": _EN}


def digest_system(language: Language, user: str, chars: int) -> str:
    prompts, headings = SUMMARY_PROMPTS[language], CONTEXT_TEXTS[language].digest_headings
    sections = "\n".join(f"## {headings[name]}\n{prompts.guidance[name].format(user=user)}" for name in DIGEST_SECTIONS)
    return prompts.digest.format(sections=sections, chars=chars)


def digest_markdown(sections: Mapping[str, str], language: Language) -> str:
    headings = CONTEXT_TEXTS[language].digest_headings
    return "\n\n".join(f"## {headings.get(name, name)}\n{body}" for name, body in sections.items())


_CANONICAL = {
    heading.casefold(): name for texts in CONTEXT_TEXTS.values() for name, heading in texts.digest_headings.items()
}
_HEADING = re.compile(
    r"^\s*#{1,3}\s*(" + "|".join(re.escape(h) for h in sorted(_CANONICAL, key=len, reverse=True)) + r")\s*:?\s*$",
    re.MULTILINE | re.IGNORECASE,
)


def answered_sections(text: str) -> dict[str, str]:
    """The `## ` sections a digest answer has, by canonical name (under either language's headings)."""
    parts = _HEADING.split(text)
    return {_CANONICAL[parts[i].casefold()]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def parse_sections(text: str, previous: Mapping[str, str] | None) -> dict[str, str] | None:
    """The five `## ` sections of a digest answer, under either language's headings; a missing one keeps
    the previous digest's text. None when the answer has none of them (it is not a digest)."""
    found = answered_sections(text)
    if not found:
        return None
    return {name: found.get(name) or (previous or {}).get(name, "") for name in DIGEST_SECTIONS}
