"""The character's identity anchor: who the character is and the iron rules it keeps, in a few lines that
go word for word where a long story would otherwise lose them — in a re-anchoring block just before the
user's words (the right end of the model's attention), at the head of the story's digest, and in the
summarizers' instructions.

The creator writes it on the card (the `identity_anchor` setting, which a story may override); a card
without one has it derived from its own text: the opening of its description (cut at a sentence's end),
its personality where that is short, and its post-history instructions (the rules the card already asks
to be kept at the end of every prompt). `{{char}}`/`{{user}}` stay as written; the context fills them.

The fixed texts around it are here in both languages (`ANCHOR_TEXTS[language]`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from domain.language import Language
from domain.values import CardData, StorySettings

DESCRIPTION_CHARS = 500  # of the description a derived anchor takes, at most
PERSONALITY_CHARS = 200  # a personality line longer than this is left to the system prompt
RULES_CHARS = 400  # of the post-history instructions
_SENTENCE_END = re.compile(r"[.!?。！？…]['\"”’」』)）]*(?=\s|$)|[。！？…]['\"”’」』)）]*")


def identity_anchor(card: CardData, settings: StorySettings, rules: bool = True) -> str:
    """The anchor as the creator wrote it (`settings.identity_anchor`), else derived from the card (without
    the post-history instructions when not `rules`: where the context has them just before)."""
    written = settings.identity_anchor.strip()
    return written if written else derived_anchor(card, rules)


def derived_anchor(card: CardData, rules: bool = True) -> str:
    """The description's opening, the personality (when short) and the post-history instructions (not
    with `rules` off, unless the card says nothing else of who the character is)."""
    parts = []
    description = _opening(card.description, DESCRIPTION_CHARS)
    if description:
        parts.append(description)
    personality = " ".join(card.personality.split())
    if personality and len(personality) <= PERSONALITY_CHARS:
        parts.append(personality)
    instructions = _opening(card.post_history_instructions, RULES_CHARS) if rules or not parts else ""
    if instructions:
        parts.append(instructions)
    return "\n".join(parts) if parts else card.name


def _opening(text: str, most: int) -> str:
    """The text's first `most` characters, ended at the last sentence end inside them (whitespace tidied);
    cut mid-sentence, with an ellipsis, only when no sentence ends there."""
    text = "\n".join(" ".join(line.split()) for line in text.strip().splitlines() if line.strip())
    if len(text) <= most:
        return text
    head = text[:most]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= most // 3:
        return head[: ends[-1]].rstrip()
    return head.rstrip() + "…"


@dataclass(frozen=True, slots=True)
class AnchorTexts:
    heading: str  # {char}: opens the anchor, wherever it goes
    periodic: str  # {char}: why a periodic re-anchoring block is there, to the model
    forced: str  # {char} {signals} {hints}: why a forced one is there
    hint_sep: str
    signal_names: Mapping[str, str]  # per drift signal: what the model is told drifted
    hints: Mapping[str, str]  # per drift signal: what to do ({chars} {phrase} {user} {char} {language} {match})
    languages: Mapping[str, str]  # the card's language, named in the language hint
    summary_rule: str  # {char} {anchor}: the summarizers' instruction that carries the anchor


ANCHOR_TEXTS: Mapping[Language, AnchorTexts] = {
    "zh": AnchorTexts(
        heading="【身份锚点 · {char}】",
        periodic="（定期重申：以上是{char}是谁、始终遵守的铁律。接下来的回复以{char}自己的身份和口吻来写。）",
        forced="（最近的回复偏离了角色：{signals}。以上是{char}是谁、始终遵守的铁律。下一条回复回到这个身份和口吻：{hints}。）",
        hint_sep="；",
        signal_names={
            "creep": "回复越写越长",
            "banned": "出现了角色卡禁止的写法",
            "repeat": "反复使用同一句话",
            "language": "换了语言",
            "echo": "复述对方的话",
        },
        hints={
            "creep": "篇幅回到早先的长度（约 {chars} 字）",
            "banned": "不再使用「{match}」这类写法",
            "repeat": "不再重复「{phrase}」",
            "language": "用{language}回答",
            "echo": "用{char}自己的话回应，不复述{user}的原话",
        },
        languages={"zh": "中文", "en": "英文"},
        summary_rule="【{char}是谁（身份锚点，摘要不得与之矛盾，写{char}的言行时保持这个身份）】\n{anchor}",
    ),
    "en": AnchorTexts(
        heading="[WHO {char} IS]",
        periodic="(A periodic reminder: this is who {char} is and the rules {char} always keeps. The next reply is"
        " written as {char}, in {char}'s own voice.)",
        forced="(The latest replies drifted from the character: {signals}. This is who {char} is and the rules {char}"
        " always keeps. The next reply returns to this identity and voice: {hints}.)",
        hint_sep="; ",
        signal_names={
            "creep": "the replies keep growing longer",
            "banned": "a pattern the card forbids appeared",
            "repeat": "the same phrase keeps coming back",
            "language": "the language changed",
            "echo": "the other's words are repeated back",
        },
        hints={
            "creep": "keep it about as long as the early replies (about {chars} characters)",
            "banned": 'no more writing like "{match}"',
            "repeat": 'do not repeat "{phrase}" again',
            "language": "answer in {language}",
            "echo": "answer in {char}'s own words instead of repeating {user}'s",
        },
        languages={"zh": "Chinese", "en": "English"},
        summary_rule="[WHO {char} IS: the identity anchor. The summary never contradicts it, and describes what"
        " {char} says and does as this character]\n{anchor}",
    ),
}
