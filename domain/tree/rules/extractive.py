"""The offline summarizer: deterministic extractive summaries for when no side model is configured.

It writes nothing new: it picks sentences from the covered turns (Chinese or English) by plain
signals — what a sentence tells (its content terms, the rarer in the pack the more: a place, a thing,
a name said once outranks the greetings and thanks that fill a chat), names other than the speaker's,
numbers and times, promises and open questions, position — and keeps them in story order. Episodes are a few hundred characters; the digest fills the same five sections a model
would, carrying the previous digest forward so nothing it held is lost, and takes 当前场景 from the
last covered turns.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from domain.language import Language
from domain.values import DIGEST_SECTIONS

EPISODE_CHARS = 600
SECTION_CHARS = {"前情提要": 2400, "人物": 1200, "承诺与伏笔": 1200, "事实账": 1200, "当前场景": 500}
SUMMARY_CHARS = sum(SECTION_CHARS.values())  # what all summary layers of a path may hold together
MIN_OUTLINE_CHARS = 600


def digest_budget(episodes_kept: int) -> int:
    """The digest's size when `episodes_kept` episodes follow it. The kept episodes are the recent end of
    the story's outline, so their room comes out of 前情提要 (down to MIN_OUTLINE_CHARS) and the other
    sections keep theirs: the layers add detail for recent turns without adding to the total."""
    outline = max(MIN_OUTLINE_CHARS, SECTION_CHARS["前情提要"] - episodes_kept * EPISODE_CHARS)
    return SUMMARY_CHARS - SECTION_CHARS["前情提要"] + outline


_SENTENCE = re.compile(r"[^。！？!?…\n.]+(?:[。！？!?…]+[”」』\"']?|\.+|$)")
_SPEAKER = re.compile(r"^([^：:\n]{1,32})(?:：|: )")
SAID: dict[Language, str] = {"zh": "：", "en": ": "}
OUTLINE: dict[Language, str] = {"zh": "第{first}–{last}轮：{text}", "en": "Turns {first}–{last}: {text}"}
_PROMISE = re.compile(
    r"答应|承诺|约定|保证|发誓|一定会|以后|改天|下次|等我|别忘|记得|秘密|线索|为什么|谁|"
    r"\bpromise|\bswear|\bnext time\b|\bsecret\b|\bremember\b|\bwhy\b|\bplan(?:s|ning)? to\b",
    re.IGNORECASE,
)
_THREAD = re.compile(rf"{_PROMISE.pattern}|\bwill\b|\?|？", re.IGNORECASE)  # 承诺与伏笔: and what is left open
_FACT = re.compile(
    r"\d|[一二三四五六七八九十百千两]+[天年月日点个只把张次岁号]|今天|明天|昨天|早上|晚上|清晨|黄昏|深夜|"
    r"\b(?:today|tomorrow|yesterday|morning|evening|night|o'clock|years?|days?)\b",
    re.IGNORECASE,
)


_WORD = re.compile(r"[a-z][a-z']+")
_NUMBER = re.compile(r"\d+")
_ASKED = re.compile(r"[?？][!！?？.…。]*[”」』\"']?$")  # (an open question: what the next sentences answer)
_HAN = re.compile(r"[\u4e00-\u9fff]+")
# fmt: off
_SMALL_TALK = frozenset({  # (words of four letters or more a chat says whatever it is about; contractions go too)
    "that", "this", "with", "have", "what", "your", "from", "they", "them", "then", "than", "been", "were",
    "will", "would", "could", "should", "there", "their", "about", "just", "really", "know", "like",
    "think", "into", "also", "when", "where", "which", "while", "some", "more", "much", "very", "such",
    "here", "thanks", "thank", "yeah", "great", "awesome", "amazing", "glad", "sounds", "sound", "love",
    "cool", "nice", "good", "sure", "okay", "totally",
})
# fmt: on
_FILLER_HAN = re.compile(r"[的了吗呢啊呀吧嗯哦哈么啦嘛]")  # (a pair of characters with a particle tells nothing)
# fmt: off
_SMALL_TALK_HAN = frozenset({  # (pairs of characters a chat says whatever it is about)
    "谢谢", "不客", "客气", "真好", "开心", "厉害", "高兴", "我们", "你们", "他们", "什么", "这个", "那个", "真是", "真的", "一个",
    "没有", "知道", "觉得", "就是", "可以", "这样", "那样", "还是", "已经", "非常", "特别", "好好", "太好", "好棒", "喜欢", "感觉",
    "一起", "不错", "当然", "其实", "因为", "所以", "但是", "如果", "怎么", "这么", "那么",
})
# fmt: on


@dataclass(frozen=True, slots=True)
class Line:
    """One covered node: who spoke, what was said, in which turn."""

    speaker: str
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class _Sentence:
    text: str
    speaker: str
    turn: int
    order: int


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if len(s.strip()) > 1]


def _split(lines: Sequence[Line]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for line in lines:
        for text in sentences(line.text):
            out.append(_Sentence(text, line.speaker, line.turn, len(out)))
    return out


def terms(text: str) -> frozenset[str]:
    """A sentence's content terms: lowercased words of four letters or more outside the small talk of a
    chat, numbers, and pairs of consecutive Chinese characters."""
    words = _WORD.findall(text.lower().replace("’", "'"))
    found = {w for w in words if len(w) >= 4 and "'" not in w and w not in _SMALL_TALK}
    found.update(_NUMBER.findall(text))
    for run in _HAN.findall(text):
        pairs = (run[i : i + 2] for i in range(len(run) - 1))
        found.update(p for p in pairs if p not in _SMALL_TALK_HAN and not _FILLER_HAN.search(p))
    return frozenset(found)


def _score(
    sentence: _Sentence, names: Sequence[str], last: int, rarity: Mapping[str, float], spoken: frozenset[str]
) -> float:
    """What a sentence tells: its terms, the rarer in the pack the more (a name, a place, a thing said
    once; more terms count for more, less than in proportion, and a sentence of few terms as short), and the promises, facts, questions and `names` (those
    of no speaker of the pack: who is spoken to is small talk's; nor are the speakers' names, `spoken`,
    terms of it) in it."""
    text = sentence.text
    told = sorted(terms(text) - spoken)  # (in order: the sum is the same whatever the hash seed)
    score = 1.5 * math.fsum(rarity.get(t, 0.0) for t in told) / math.sqrt(max(len(told), 8))
    score += 1.0 * sum(name in text for name in names)
    score += 1.5 * bool(_PROMISE.search(text)) + 1.0 * bool(_FACT.search(text)) + 1.0 * bool(_ASKED.search(text))
    score += 0.5 * (sentence.order == last)  # the turn the pack ends on
    return score


def _pick(items: Sequence[_Sentence], names: Sequence[str], budget: int) -> list[_Sentence]:
    """The best-scoring sentences that fit `budget` characters, back in story order."""
    if not items:
        return []
    last = items[-1].order
    counts = Counter(t for s in items for t in terms(s.text))
    rarity = {t: 1.0 / n for t, n in counts.items()}
    speakers = {s.speaker for s in items}
    named = [name for name in dict.fromkeys(names) if len(name) > 1 and name not in speakers]
    spoken = frozenset().union(*(terms(name) for name in speakers))
    ranked = sorted(items, key=lambda s: (-_score(s, named, last, rarity, spoken), s.order))
    chosen, used, said = [], 0, set()
    for sentence in ranked:
        cost = len(sentence.text) + len(sentence.speaker) + 2
        if used + cost <= budget and sentence.text not in said:  # (a sentence said again: once)
            chosen.append(sentence)
            said.add(sentence.text)
            used += cost
    return sorted(chosen, key=lambda s: s.order)


def summarize_episode(
    lines: Sequence[Line], names: Sequence[str] = (), budget: int = EPISODE_CHARS, language: Language = "zh"
) -> str:
    """A chronological extract of one pack: `<speaker>：sentence` joined by spaces, at most `budget` chars."""
    picked = _pick(_split(lines), names, budget)
    return " ".join(f"{s.speaker}{SAID[language]}{s.text}" for s in picked)


def _section_caps(budget: int) -> dict[str, int]:
    """Each section's room: a budget under SUMMARY_CHARS comes out of 前情提要 down to MIN_OUTLINE_CHARS;
    a smaller one (a small prompt budget) shrinks every section in proportion."""
    caps = dict(SECTION_CHARS)
    caps["前情提要"] = max(MIN_OUTLINE_CHARS, caps["前情提要"] - (SUMMARY_CHARS - budget))
    total = sum(caps.values())
    if budget < total:
        caps = {name: max(40, cap * budget // total) for name, cap in caps.items()}
    return caps


def fold_digest(
    previous: Mapping[str, str] | None,
    episodes: Sequence[tuple[int, int, str]],
    latest: Sequence[Line],
    names: Sequence[str] = (),
    scene: str = "",
    budget: int = SUMMARY_CHARS,
    language: Language = "zh",
) -> dict[str, str]:
    """The five sections, folding the previous digest with the absorbed episodes ((first turn, last turn,
    text), oldest first); 当前场景 comes from `latest`, the last covered turns, and the scene snapshot.
    A `budget` under SUMMARY_CHARS is taken from 前情提要 (see `digest_budget`). Sections are keyed by
    their canonical names; `language` is that of the labels written into them."""
    previous, sep = previous or {}, SAID[language]
    caps = _section_caps(budget)
    sections = dict.fromkeys(DIGEST_SECTIONS, "")
    outline = [OUTLINE[language].format(first=a, last=b, text=text) for a, b, text in episodes if text.strip()]
    earlier = previous.get("前情提要", "").splitlines()  # entry by entry: the oldest are shortened first
    sections["前情提要"] = _bounded([*earlier, *outline], caps["前情提要"])
    pool = [_spoken(s) for _, _, text in episodes for s in sentences(text)]
    pool += [(s.speaker, s.text) for s in _split(latest)]
    sections["人物"] = _people(previous.get("人物", ""), names, pool, caps["人物"], sep)
    promises = [item for item in pool if _THREAD.search(item[1])]
    sections["承诺与伏笔"] = _merged_items(previous.get("承诺与伏笔", ""), promises, caps["承诺与伏笔"], sep)
    facts = [item for item in pool if _FACT.search(item[1])]
    sections["事实账"] = _merged_items(previous.get("事实账", ""), facts, caps["事实账"], sep)
    recent = [s for s in _split(latest) if s.turn >= (latest[-1].turn - 1 if latest else 0)]
    now = " ".join(f"{s.speaker}{sep}{s.text}" for s in _pick(recent, names, caps["当前场景"] - len(scene)))
    sections["当前场景"] = "\n".join(part for part in (scene.strip(), now) if part) or previous.get("当前场景", "")
    return sections


def _spoken(sentence: str) -> tuple[str, str]:
    """(speaker, words) of an extracted `<speaker>：words` sentence; no speaker when there is no prefix."""
    found = _SPEAKER.match(sentence)
    return (found.group(1), sentence[found.end() :]) if found else ("", sentence)


def _said(item: tuple[str, str], sep: str) -> str:
    return f"{item[0]}{sep}{item[1]}" if item[0] else item[1]


def _bounded(parts: Iterable[str], budget: int) -> str:
    """Paragraphs joined; when too long, the oldest are shortened to their first sentence first."""
    items = [p.strip() for p in parts if p.strip()]
    text = "\n".join(items)
    i = 0
    while len(text) > budget and i < len(items):
        first = sentences(items[i])[:1]
        items[i] = (first[0] + "…") if first else ""
        text = "\n".join(p for p in items if p)
        i += 1
    return text if len(text) <= budget else "…" + text[-budget:]


def _people(previous: str, names: Sequence[str], pool: Sequence[tuple[str, str]], budget: int, sep: str) -> str:
    """One line per known name: the last thing said by or about them (earlier lines are kept)."""
    lines = {who: line for line in previous.splitlines() if (who := _spoken(line.lstrip("- "))[0])}
    for name in dict.fromkeys(n.strip() for n in names if n.strip()):
        mentions = [item for item in pool if name in item[1] or item[0] == name]
        if mentions:
            lines[name] = f"- {name}{sep}{_said(mentions[-1], sep)}"
    return _bounded(lines.values(), budget)


def _merged_items(previous: str, found: Sequence[tuple[str, str]], budget: int, sep: str) -> str:
    """The previous items, then new sentences not already there; the oldest go first when full."""
    items = [line.lstrip("- ").strip() for line in previous.splitlines() if line.strip()]
    known = {_spoken(item)[1] for item in items}
    for item in found:
        if item[1] not in known:
            known.add(item[1])
            items.append(_said(item, sep))
    while items and sum(len(i) + 3 for i in items) > budget:
        items.pop(0)
    return "\n".join(f"- {item}" for item in items)
