"""The checks a side model's summary passes before it is stored: a summary stands in for the turns it
covers for the rest of the story, so one that lost a section, ran long, carries a pattern the card bans,
puts the story back in an older scene or names people nobody met would mislead every later context.
A summary that fails is asked for again with the reasons; failing twice, the offline summarizer's stands
in (`schedulers/workers/compaction.py`), and the reasons are recorded on the job.

Each check returns the ways it failed (`Failure`: a code and its values), which the summarizers put in
words in the story's language when they ask again, and in English on the job."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import regex

from domain.language import Language
from domain.tree.rules.drift import banned_match, compiled_pattern
from domain.values import BANNED_SECONDS, DIGEST_SECTIONS

EPISODE_MOST = {"zh": 1500, "en": 3500}  # characters: about three times what the episode prompt asks
EPISODE_LEAST = 50  # characters, or a fortieth of the covered text's when that is less
DIGEST_OVER = 1.5  # a digest may run this much over the characters it was asked to keep to
REQUIRED = ("前情提要", "当前场景")  # sections that may not be empty (the others may have nothing yet)
SCENE_SHARE = 0.2  # of 当前场景's words, at least this share found in the latest turns (or the scene's ledger)
_WORD = regex.compile(r"[\p{L}\p{N}]{4,}")
_HAN_RUN = regex.compile(r"\p{Han}+")
_ENTRY = re.compile(
    r"^([ \t]*)(?:[-*•·]|\d+[.)、])?[ \t]*(?:\*\*)?([^：:*\n]{1,24}?)(?:\*\*)?[ \t]*[：:]", re.MULTILINE
)  # (an indented item is a detail of the entry above it, not a name)
_SPLIT = re.compile(r"[、,，/&]|\band\b")
_ASIDE = re.compile(r"[（(]")  # `老周（守塔人）`: the name before the aside
_NOT_A_NAME = re.compile(r"(?:[Tt]he|[Aa]n?)\s+[a-z]")  # `The stranger`: a description (`An Qi` is a name)
LABELS = (  # what an entry of 人物 may open with that is not a name (the guidance's own words among them)
    "性格", "说话", "口癖", "称呼", "关系", "外貌", "身份", "状态", "态度", "近况", "走向", "温度", "备注", "其他", "其它",
    "特点", "喜好", "习惯", "personality", "speech", "speaking", "relationship", "appearance", "status", "role",
    "attitude", "notes", "other", "address", "manner", "voice", "warmth", "direction", "trait", "likes", "habit",
    "时间", "地点", "场景", "目标", "动机", "time", "place", "goal", "motive",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Failure:
    """One way a summary failed its checks: `code` (short, long, missing, empty, banned, scene, strangers)
    and the values its words are filled with."""

    code: str
    values: tuple[tuple[str, object], ...] = ()

    def words(self, templates: Mapping[str, str], headings: Mapping[str, str] | None = None, sep: str = "、") -> str:
        """In words: the template of its code filled; a list of sections or names joined by `sep`, each
        section shown under its heading in `headings` (the language's, for a model; canonical, for a job)."""
        values = {
            key: sep.join((headings or {}).get(item, item) for item in value) if isinstance(value, tuple) else value
            for key, value in self.values
        }
        return templates[self.code].format(**values)


ENGLISH = {
    "short": "too short: {length} characters",
    "long": "too long: {length} characters, at most {most}",
    "missing": "sections missing: {sections}",
    "empty": "sections empty: {sections}",
    "banned": "a banned pattern found ({pattern})",
    "scene": "当前场景 is not drawn from the latest turns ({share:.0%} of its words are in them)",
    "strangers": "人物 names someone in none of the turns summarized: {names}",
}


def in_english(failures: Sequence[Failure]) -> str:
    return "; ".join(failure.words(ENGLISH) for failure in failures)


def check_episode(text: str, covered: str, banned: Sequence[str], language: Language) -> list[Failure]:
    """An episode: neither empty nor too long, and no banned pattern."""
    failures = []
    length = len(text.strip())
    if length < min(EPISODE_LEAST, len(covered.strip()) // 40):
        failures.append(Failure("short", (("length", length),)))
    if length > EPISODE_MOST[language]:
        failures.append(Failure("long", (("length", length), ("most", EPISODE_MOST[language]))))
    return failures + banned_found(text, banned)


def check_digest(
    answered: Mapping[str, str],
    latest: str,
    sources: str,
    known: Iterable[str],
    banned: Sequence[str],
    budget: int,
    location: str = "",
) -> list[Failure]:
    """A digest, as the model answered it (`answered`: the sections it wrote, by canonical name): every
    section there, 前情提要 and 当前场景 not empty, at most DIGEST_OVER × `budget` characters, no banned
    pattern, every name 人物 lists known — in `known` (the card's, the user's, the roster's) or in the
    `sources` the digest was made from — and 当前场景 drawn from the `latest` turns where the scene's ledger
    says where the story is now (`location`): a 当前场景 that names neither that place nor enough of the
    latest turns' words is an older scene carried over. (Without a ledger it is not judged: a scene that
    stays put for many turns is not named in every one of them.)"""
    failures = []
    missing = [name for name in DIGEST_SECTIONS if name not in answered]
    if missing:
        failures.append(Failure("missing", (("sections", tuple(missing)),)))
    empty = [name for name in REQUIRED if name in answered and not answered[name].strip()]
    if empty:
        failures.append(Failure("empty", (("sections", tuple(empty)),)))
    length = sum(len(body.strip()) for body in answered.values())
    if length > budget * DIGEST_OVER:
        failures.append(Failure("long", (("length", length), ("most", int(budget * DIGEST_OVER)))))
    failures += banned_found("\n".join(answered.values()), banned)
    scene = answered.get("当前场景", "").strip()
    names = [name for name in known if name.strip()]
    if scene and latest.strip() and location.strip() and not terms(location) & terms(scene):
        share = scene_share(scene, latest, names)
        if share is not None and share < SCENE_SHARE:
            failures.append(Failure("scene", (("share", share),)))
    strangers = unknown_names(answered.get("人物", ""), names, sources)
    if strangers:
        failures.append(Failure("strangers", (("names", tuple(strangers)),)))
    return failures


def without_banned(text: str, banned: Sequence[str]) -> str:
    """The text with every match of a banned pattern put out ("…"): what the offline summary, which copies
    sentences from the turns, stores when the turns themselves drifted into them (the rest of each sentence
    stays: who did what is still the story's)."""
    for pattern in banned:
        compiled = compiled_pattern(pattern)
        if compiled is None:
            continue
        try:
            text = compiled.sub(lambda m: "…" if m.group(0) else "", text, timeout=BANNED_SECONDS)
        except TimeoutError:
            continue
    return text


def banned_found(text: str, banned: Sequence[str]) -> list[Failure]:
    failures = []
    for pattern in banned:
        try:
            found = banned_match(pattern, text)
        except TimeoutError:
            continue
        if found is not None:
            failures.append(Failure("banned", (("pattern", found.group(0)[:60]),)))
    return failures


def terms(text: str) -> set[str]:
    """Words of four letters or more (lower-cased) and pairs of Han characters."""
    out = {w.casefold() for w in _WORD.findall(text) if not _HAN_RUN.fullmatch(w)}
    for run in _HAN_RUN.findall(text):
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out


def scene_share(scene: str, latest: str, names: Sequence[str]) -> float | None:
    """The share of the scene's terms found in `latest`, the names everyone shares left out (None: the
    scene says too little to judge)."""
    common = set().union(*(terms(name) for name in names)) if names else set()
    mine = terms(scene) - common
    if len(mine) < 3:
        return None
    return len(mine & terms(latest)) / len(mine)


def unknown_names(characters: str, known: Sequence[str], sources: str) -> list[str]:
    """The names 人物's entries open with (`- 名字：…`, `**Name**: …`) found neither among `known` nor in
    `sources`."""
    folded_sources = sources.casefold()
    folded_known = [k.casefold() for k in known]
    out = []
    for match in _ENTRY.finditer(characters):
        if match.group(1):
            continue
        for name in _SPLIT.split(_ASIDE.split(match.group(2), 1)[0]):
            name = name.strip().strip("*#（）()[]【】「」\"' ")
            if (
                not name
                or len(name) > 20
                or any(label in name.casefold() for label in LABELS)
                or _NOT_A_NAME.match(name)
            ):
                continue
            folded = name.casefold()
            if folded in folded_sources or any(folded in k or k in folded for k in folded_known):
                continue
            out.append(name)
    return list(dict.fromkeys(out))
