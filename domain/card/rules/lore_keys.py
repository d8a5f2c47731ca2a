"""How a lore key matches a text: plain keys (case, whole words, CJK without spaces), `/pattern/flags` keys
under a time limit, `{{char}}`/`{{user}}` filled in, and secondary keys by their logic. Pure functions;
the rules they follow are listed in `domain/card/rules/lore.py`, which activates entries with them."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from domain.card.lore import SelectiveLogic
from domain.macros import fill_macros

_SLASHED = re.compile(r"/([\s\S]+?)/([gimsuxy]*)")
_UNESCAPED_SLASH = re.compile(r"(?:^|[^\\])/")
_REGEX_FLAGS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL, "x": regex.VERBOSE}
CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
CJK_PIECES = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+|[^\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+"
)
LETTERS_AND_DIGITS = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Text:
    """A scan text and its case-folded form."""

    raw: str
    folded: str

    @classmethod
    def of(cls, raw: str) -> Text:
        return cls(raw, raw.casefold())


@dataclass(frozen=True, slots=True)
class Rule:
    """How one entry's keys are matched."""

    book_id: str
    uid: int
    case_sensitive: bool
    whole_words: bool
    use_regex: bool
    slow: set[tuple[int, str]] = field(default_factory=set, compare=False)  # the book's keys that ran out of time


@dataclass(frozen=True, slots=True)
class _Pattern:
    pattern: str
    flags: int
    anchored: bool


class Matcher:
    """Key matching for one activation: the keys that ran out of time. Patterns are compiled once per process;
    a key that ran out of time is not run again for that book (its `slow` set, kept with the prepared book);
    with a `clock`, all of an activation's patterns share `budget` seconds — past it they count as no match —
    so no lorebook makes every context slow. Keys left out either way are reported every time."""

    def __init__(self, *, timeout: float, clock: Callable[[], float] | None, budget: float) -> None:
        self._timeout, self._clock = timeout, clock
        self._deadline = clock() + budget if clock is not None else None
        self.timed_out: dict[tuple[str, int, str], None] = {}

    def first(self, keys: Sequence[Key], text: Text, rule: Rule) -> str | None:
        return next((key.written for key in keys if self.matches(key, text, rule)), None)

    def matches(self, key: Key, text: Text, rule: Rule) -> bool:
        if key.pattern is None:
            return _plain_match(key.needle, text, rule)
        where = (rule.book_id, rule.uid, key.written)
        if key.compiled is None:
            return False
        timeout = self._timeout
        if self._deadline is not None and self._clock is not None:
            timeout = min(timeout, self._deadline - self._clock())
        if (rule.uid, key.written) in rule.slow or timeout <= 0:
            self.timed_out[where] = None
            return False
        search = key.compiled.match if key.pattern.anchored else key.compiled.search
        try:
            found = search(text.raw, timeout=timeout)
        except TimeoutError:
            if timeout >= self._timeout:  # its own limit, not the activation's remaining budget
                rule.slow.add((rule.uid, key.written))
            self.timed_out[where] = None
            return False
        return found is not None


@dataclass(frozen=True, slots=True)
class Key:
    """A key as written, and ready to match: its pattern compiled (names filled, escaped), or its text with the
    names filled (case-folded unless the entry is case-sensitive)."""

    written: str
    pattern: _Pattern | None
    compiled: Any
    needle: str


REGEX_SECONDS = 0.02  # a regex key's time limit per search
REGEX_BUDGET = 0.15  # what all of an activation's regex searches may take together
_COMPILED: dict[tuple[str, int], Any] = {}
_COMPILED_MAX = 4096


def _compiled(pattern: _Pattern, char: str, user: str) -> Any:
    filled = fill_macros(pattern.pattern, regex.escape(char), regex.escape(user))
    cache_key = (filled, pattern.flags)
    if cache_key not in _COMPILED:
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        try:
            _COMPILED[cache_key] = regex.compile(filled, pattern.flags)
        except (regex.error, ValueError, OverflowError, RecursionError):
            _COMPILED[cache_key] = None
    return _COMPILED[cache_key]


def key_of(key: str, rule: Rule, char: str, user: str) -> Key | None:
    written = key.strip()
    if not written:
        return None
    pattern = _pattern_of(written, rule)
    if pattern is not None:
        return Key(key, pattern, _compiled(pattern, char, user), "")
    needle = fill_macros(written, char, user).strip()
    return Key(key, None, None, needle if rule.case_sensitive else needle.casefold())


def _pattern_of(key: str, rule: Rule) -> _Pattern | None:
    """The key as a regular expression, when it is one: written `/pattern/flags`, or any key of a regex entry."""
    slashed = _SLASHED.fullmatch(key)
    if slashed and not _UNESCAPED_SLASH.search(slashed[1]):
        flags = 0
        for letter in slashed[2]:
            flags |= _REGEX_FLAGS.get(letter, 0)
        return _Pattern(slashed[1], flags, "y" in slashed[2])
    if rule.use_regex:
        return _Pattern(key, 0 if rule.case_sensitive else regex.IGNORECASE, False)
    return None


def _plain_match(needle: str, text: Text, rule: Rule) -> bool:
    """`needle`: the key with the names filled, already case-folded unless the entry is case-sensitive."""
    if not needle:
        return False
    haystack = text.raw if rule.case_sensitive else text.folded
    if needle not in haystack:
        return False
    if not rule.whole_words:
        return True
    return any(_on_boundaries(haystack, at, needle) for at in _occurrences(haystack, needle))


def _occurrences(haystack: str, needle: str) -> Iterator[int]:
    at = haystack.find(needle)
    while at >= 0:
        yield at
        at = haystack.find(needle, at + 1)


def _on_boundaries(haystack: str, at: int, needle: str) -> bool:
    end = at + len(needle)
    left = at == 0 or not _spaced_word_char(needle[0]) or not _spaced_word_char(haystack[at - 1])
    right = end == len(haystack) or not _spaced_word_char(needle[-1]) or not _spaced_word_char(haystack[end])
    return left and right


def _spaced_word_char(ch: str) -> bool:
    """A letter, digit, mark or `_` of a script that puts spaces between words (so: not CJK)."""
    return (ch == "_" or unicodedata.category(ch)[0] in "LNM") and CJK.match(ch) is None


def secondary_allows(
    logic: SelectiveLogic, keys: Sequence[str], matches: Callable[[str], bool]
) -> tuple[bool, str | None]:
    """Whether the secondary keys allow the entry, and the secondary key that did (for and_any, and_all)."""
    if logic == "and_any":
        found = next((key for key in keys if matches(key)), None)
        return found is not None, found
    if logic == "and_all":
        return all(map(matches, keys)), keys[0]
    if logic == "not_any":
        return not any(map(matches, keys)), None
    return not all(map(matches, keys)), None
