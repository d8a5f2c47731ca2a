"""Drift signals: what the program can see, from the replies alone, of a character sliding out of itself
over a long chat — replies that keep growing (creep), a pattern the card forbids, the same phrase coming
back reply after reply, a switch away from the card's language, the user's words echoed back.

Each signal is judged at one reply from the few exchanges that end there (`RECENT` of them, newest
last) and, for creep, the lengths of the path's first replies: a fold over the path, so a regenerate or
a branch has signals of its own, and judging a reply costs the same however long the story. Two or more
signals at a reply force a re-anchoring block into the next turn's context (`forced`); drift that goes on
forces one again every `FORCE_EVERY` replies, not at every turn. The thresholds are story settings; their
defaults were measured on chats nobody wrote to drift (`ops/bench/drift.py`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Literal
from uuid import UUID

import regex

from domain.language import Language
from domain.values import BANNED_SECONDS, StorySettings

SignalName = Literal["creep", "banned", "repeat", "language", "echo"]
SIGNALS: tuple[SignalName, ...] = ("creep", "banned", "repeat", "language", "echo")
RECENT = 5  # exchanges a reply is judged with (itself the newest)
EARLY = 10  # the path's first replies, the character's own measure of length
EARLY_MIN = 5  # fewer than this: no creep is judged yet
CREEP_OF = 3  # the replies whose median length is set against the early one
RISING = 4  # ... and those that must be rising (Kendall's tau at least RISE_TAU): growing, not one long answer
RISE_TAU = 0.5
REPEAT_IN = 3  # a phrase is repeated when it is in this many of the last RECENT replies
PHRASE = {"en": 5, "zh": 8}  # tokens (words; for Chinese, characters) in a phrase
ECHO_GRAM = {"en": 3, "zh": 4}
ECHO_MIN = {"en": 8, "zh": 12}  # user's words shorter than this are not judged for echo (tokens)
LANGUAGE_MIN = 12  # tokens a reply needs to be judged for its language
FORCE_EVERY = 5  # drift that goes on forces a re-anchoring every this many replies
RUN_MOST = 100  # ... for at most this many replies (then the periodic re-anchoring alone goes on)
_HAN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]")
_TOKEN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]|[\p{L}\p{N}]+(?:['’][\p{L}]+)?")
_COMPILED: dict[str, regex.Pattern[str] | None] = {}


@dataclass(frozen=True, slots=True)
class Exchange:
    """One reply and the user's words it answers ('' after the greeting)."""

    reply_id: UUID
    turn: int
    words: str
    reply: str


@dataclass(frozen=True, slots=True)
class Thresholds:
    creep: float
    repeat: int
    language: float
    echo: float
    banned: tuple[str, ...]

    @classmethod
    def of(cls, settings: StorySettings) -> Thresholds:
        return cls(
            settings.drift_creep, settings.drift_repeat, settings.drift_language, settings.drift_echo,
            settings.banned_patterns,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Signal:
    """One signal at a reply: its value against its threshold (0: switched off), whether it fired, the
    replies behind it, and what it saw (`evidence`: the phrase, the match, the early length)."""

    name: SignalName
    value: float
    threshold: float
    fired: bool
    replies: tuple[UUID, ...]
    detail: str
    evidence: str = ""


def signals_at(
    recent: Sequence[Exchange], early: Sequence[int], language: Language, thresholds: Thresholds
) -> tuple[Signal, ...]:
    """The five signals at the newest of `recent` (the exchanges up to it, oldest first); `early`: the
    lengths in characters of the path's first replies (at most EARLY)."""
    if not recent:
        return ()
    return (
        creep(recent, early, thresholds.creep),
        banned(recent[-1], thresholds.banned),
        repeat(recent, language, thresholds.repeat),
        language_switch(recent, language, thresholds.language),
        echo(recent[-1], language, thresholds.echo),
    )


def fired(signals: Sequence[Signal]) -> int:
    return sum(signal.fired for signal in signals)


def forced(run: int) -> bool:
    """Whether the turn after a reply gets a forced re-anchoring, `run` being how many replies in a row,
    that one the last, had two or more signals: the first of them, then every FORCE_EVERY while it goes on."""
    return 1 <= run <= RUN_MOST and (run - 1) % FORCE_EVERY == 0


def reply_length(text: str) -> int:
    return len(" ".join(text.split()))


def creep(recent: Sequence[Exchange], early: Sequence[int], threshold: float) -> Signal:
    """The median length of the last CREEP_OF replies against the median of the path's first replies,
    while the last RISING replies keep growing; judged once the path has its EARLY_MIN first replies and
    the replies are past them. (Chats nobody made drift grow too — their first replies are often the
    shortest — but rarely reply after reply: the rise is what tells creep from a run of long answers.)"""
    rising = recent[-RISING:]
    ids = tuple(e.reply_id for e in rising)
    if threshold <= 0 or len(early) < EARLY_MIN or len(rising) < RISING or rising[0].turn <= len(early):
        return Signal("creep", 0.0, threshold, False, ids, "not judged: too few replies yet" if threshold else "off")
    base = max(median(early), 1.0)
    lengths = [reply_length(e.reply) for e in rising]
    now = median(lengths[-CREEP_OF:])
    value, tau = round(now / base, 2), _tau(lengths)
    detail = (
        f"median {now:.0f} characters of the last {CREEP_OF} replies against {base:.0f} of the first {len(early)};"
        f" the last {len(lengths)} {'rising' if tau >= RISE_TAU else 'not rising'} (tau {tau:.2f})"
    )
    return Signal("creep", value, threshold, value >= threshold and tau >= RISE_TAU, ids, detail, f"{base:.0f}")


def _tau(values: Sequence[int]) -> float:
    """Kendall's tau of the values against their order: 1 when each is longer than every one before."""
    pairs = [(a, b) for i, a in enumerate(values) for b in values[i + 1 :]]
    return sum((b > a) - (b < a) for a, b in pairs) / len(pairs) if pairs else 0.0


def banned(exchange: Exchange, patterns: Sequence[str]) -> Signal:
    """The card's banned patterns found in the reply (each searched for at most BANNED_SECONDS)."""
    ids = (exchange.reply_id,)
    if not patterns:
        return Signal("banned", 0.0, 0.0, False, ids, "no banned patterns")
    found, slow = [], []
    for i, pattern in enumerate(patterns):
        try:
            match = banned_match(pattern, exchange.reply)
        except TimeoutError:
            slow.append(i)
            continue
        if match is not None:
            found.append((i, match.group(0)))
    detail = ", ".join(f"pattern {i} matched {text[:60]!r}" for i, text in found) or "none matched"
    if slow:
        detail += f"; pattern(s) {', '.join(map(str, slow))} took too long and were skipped"
    return Signal("banned", float(len(found)), 1.0, bool(found), ids, detail, found[0][1][:60] if found else "")


def repeat(recent: Sequence[Exchange], language: Language, threshold: int) -> Signal:
    """Phrases (PHRASE tokens) of the newest reply that are in at least REPEAT_IN of the last RECENT
    replies, itself included, and in none of the user's words there: a tic that comes back turn after
    turn, not one quoted once, nor a form both sides write (a shared photo's caption, a status line)."""
    window = recent[-RECENT:]
    ids = tuple(e.reply_id for e in window)
    if threshold <= 0 or len(window) < REPEAT_IN:
        return Signal("repeat", 0.0, float(threshold), False, ids, "off" if threshold <= 0 else "too few replies yet")
    n = PHRASE[language]
    newest = tokens(window[-1].reply)
    mine = _grams(newest, n)
    for exchange in window:  # a phrase the user says too is the chat's convention, not the character's tic
        mine -= _grams(tokens(exchange.words), n)
    seen: Counter[tuple[str, ...]] = Counter()
    for exchange in window[:-1]:
        seen.update(_grams(tokens(exchange.reply), n) & mine)
    repeated = {gram for gram in mine if seen[gram] + 1 >= REPEAT_IN}
    phrase = _longest_run(newest, repeated, n, language)
    value = float(len(repeated))
    detail = f"{len(repeated)} phrase(s) of {n} tokens in {REPEAT_IN}+ of the last {len(window)} replies"
    return Signal("repeat", value, float(threshold), value >= threshold, ids, detail, phrase)


def language_switch(recent: Sequence[Exchange], language: Language, threshold: float) -> Signal:
    """The share of the last two replies' tokens not in the card's language (Han characters for Chinese,
    the rest for English): both over the threshold, a switch; one reply alone, a quotation."""
    last = recent[-2:]
    ids = tuple(e.reply_id for e in last)
    shares = [_foreign(e.reply, language) for e in last]
    judged = [s for s in shares if s is not None]
    if threshold <= 0 or len(judged) < 2:
        return Signal("language", 0.0, threshold, False, ids, "off" if threshold <= 0 else "too few words yet")
    value = round(min(judged), 2)
    detail = f"{value:.0%} of the words of each of the last two replies are not in the card's language"
    return Signal("language", value, threshold, value >= threshold, ids, detail, language)


def echo(exchange: Exchange, language: Language, threshold: float) -> Signal:
    """The share of the user's phrases (ECHO_GRAM tokens) the reply says again."""
    ids = (exchange.reply_id,)
    said = tokens(exchange.words)
    if threshold <= 0 or len(said) < ECHO_MIN[language]:
        return Signal("echo", 0.0, threshold, False, ids, "off" if threshold <= 0 else "the user's words too short")
    n = ECHO_GRAM[language]
    theirs = _grams(said, n)
    value = round(len(theirs & _grams(tokens(exchange.reply), n)) / len(theirs), 2)
    detail = f"{value:.0%} of the user's {len(theirs)} phrases of {n} tokens said again in the reply"
    return Signal("echo", value, threshold, value >= threshold, ids, detail)


def tokens(text: str) -> list[str]:
    """Words (lower-cased) and single Han characters, in order."""
    return [t.casefold() for t in _TOKEN.findall(text)]


def _grams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _longest_run(words: Sequence[str], grams: set[tuple[str, ...]], n: int, language: Language) -> str:
    """The longest stretch of `words` made of overlapping repeated phrases, as text."""
    best: tuple[int, int] = (0, 0)
    start = None
    for i in range(len(words) - n + 2):
        inside = i <= len(words) - n and tuple(words[i : i + n]) in grams
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            if (i - 1 + n) - start > best[1] - best[0]:
                best = (start, i - 1 + n)
            start = None
    return ("" if language == "zh" else " ").join(words[best[0] : best[1]])


def _foreign(text: str, language: Language) -> float | None:
    found = _TOKEN.findall(text)
    if len(found) < LANGUAGE_MIN:
        return None
    han = sum(1 for t in found if _HAN.match(t))
    return 1 - han / len(found) if language == "zh" else han / len(found)


def banned_match(pattern: str, text: str) -> regex.Match[str] | None:
    """The first match of a banned pattern (any case) that holds some words — an empty match is none, so
    `(as an ai)?` finds "As an AI" wherever it is — or None (also for a pattern that does not compile);
    TimeoutError past BANNED_SECONDS."""
    compiled = compiled_pattern(pattern)
    if compiled is None:
        return None
    return next((m for m in compiled.finditer(text, timeout=BANNED_SECONDS) if m.group(0)), None)


def compiled_pattern(pattern: str) -> regex.Pattern[str] | None:
    """A banned pattern compiled to match in any case, remembered (None: it does not compile)."""
    if pattern not in _COMPILED:
        if len(_COMPILED) > 1024:
            _COMPILED.clear()
        try:
            _COMPILED[pattern] = regex.compile(pattern, regex.IGNORECASE)
        except (regex.error, ValueError, OverflowError, RecursionError):
            _COMPILED[pattern] = None
    return _COMPILED[pattern]
