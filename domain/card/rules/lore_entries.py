"""Lorebook entries made ready to match, once per book version and names (`prepared`), and the pieces activation
and search share: the candidates of a set of books, an entry's keys fired against a scan text, and contents
already taken (the same content activates once). The rules are listed in `domain/card/rules/lore.py`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.card.lore import LoreBookView, LoreEntry, LoreExtras, LoreScan, extras_of
from domain.card.rules.lore_keys import Key, Matcher, Rule, Text, key_of, secondary_allows


@dataclass(frozen=True, slots=True)
class Prepared:
    """An enabled entry of a book, ready to match: how, its keys, its scan depth and its World Info extras."""

    entry_index: int
    entry: LoreEntry
    rule: Rule
    depth: int
    keys: tuple[Key, ...]
    secondaries: tuple[Key, ...]
    extras: LoreExtras
    plain: bool  # no primary key is a pattern or holds a line break: a key is never found across two texts joined
    needles: tuple[str, ...]  # the plain keys' texts as matched (a text that holds none of them fires nothing)


@dataclass(frozen=True, slots=True)
class Candidate:
    book_index: int
    book: LoreBookView
    prepared: Prepared

    @property
    def entry(self) -> LoreEntry:
        return self.prepared.entry

    @property
    def depth(self) -> int:
        return self.prepared.depth

    @property
    def extras(self) -> LoreExtras:
        return self.prepared.extras

    @property
    def place(self) -> tuple[int, int, int]:
        """Where it goes in the prompt: lower `order` first, then the book's and the entry's position."""
        return self.prepared.entry.order, self.book_index, self.prepared.entry_index


def _rule(book: LoreBookView, entry: LoreEntry, slow: set[tuple[int, str]]) -> Rule:
    scan = book.scan
    return Rule(
        book.book_id,
        entry.uid,
        scan.case_sensitive if entry.case_sensitive is None else entry.case_sensitive,
        scan.whole_words if entry.whole_words is None else entry.whole_words,
        entry.use_regex,
        slow,
    )


def _prepare(book: LoreBookView, char: str, user: str) -> list[Prepared]:
    out: list[Prepared] = []
    slow: set[tuple[int, str]] = set()
    for index, entry in enumerate(book.entries):
        if not entry.enabled:
            continue
        rule = _rule(book, entry, slow)
        keys = tuple(k for key in entry.keys if (k := key_of(key, rule, char, user)) is not None)
        secondaries = tuple(k for key in entry.secondary_keys if (k := key_of(key, rule, char, user)) is not None)
        depth = book.scan.scan_depth if entry.scan_depth is None else entry.scan_depth
        plain = all(k.pattern is None and "\n" not in k.needle for k in keys)
        needles = tuple(k.needle for k in keys if k.pattern is None and k.needle)
        out.append(Prepared(index, entry, rule, depth, keys, secondaries, extras_of(entry), plain, needles))
    return out


_PREPARED: dict[tuple[int, str, str], tuple[Sequence[LoreEntry], LoreScan, str, list[Prepared]]] = {}
_PREPARED_MAX = 1024


def prepared(book: LoreBookView, char: str, user: str) -> list[Prepared]:
    """A book's entries ready to match, kept while the same entries object is asked for again (the service keeps
    one per book version, also for views that leave some of it out): a context's activation matches, it does not
    parse."""
    key = (id(book.entries), char, user)
    kept = _PREPARED.get(key)
    if kept is not None and kept[0] is book.entries and kept[1] is book.scan and kept[2] == book.book_id:
        _PREPARED[key] = _PREPARED.pop(key)  # the most recently used last
        return kept[3]
    if len(_PREPARED) >= _PREPARED_MAX:
        del _PREPARED[next(iter(_PREPARED))]
    made = _prepare(book, char, user)
    _PREPARED[key] = (book.entries, book.scan, book.book_id, made)
    return made


def candidates(books: Sequence[LoreBookView], char: str, user: str) -> list[Candidate]:
    return [
        Candidate(b, book, ready)
        for b, book in enumerate(books)
        for ready in prepared(book, char, user)
        if ready.entry.uid not in book.excluded
    ]


def fire(candidate: Candidate, text: Text, matcher: Matcher) -> tuple[str, str | None] | None:
    """The primary key that fired and the secondary key that allowed it, or None."""
    key = matcher.first(candidate.prepared.keys, text, candidate.prepared.rule)
    return None if key is None else allowed(candidate, key, text, matcher)


def allowed(candidate: Candidate, key: str, text: Text, matcher: Matcher) -> tuple[str, str | None] | None:
    """The primary key that fired and the secondary key that allowed it, or None: the entry's secondary keys
    under its logic, once its primary `key` is in the text."""
    ready = candidate.prepared
    rule, entry = ready.rule, ready.entry
    if not entry.selective or not ready.secondaries:
        return key, None
    by_key = {k.written: k for k in ready.secondaries}
    allowed, secondary = secondary_allows(
        entry.logic, list(by_key), lambda written: matcher.matches(by_key[written], text, rule)
    )
    return (key, secondary) if allowed else None


class Contents:
    """Trimmed contents already activated: a duplicate activates once."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def claim(self, entry: LoreEntry) -> bool:
        content = entry.content.strip()
        if content and content in self._seen:
            return False
        self._seen.add(content)
        return True

    def release(self, entry: LoreEntry) -> None:
        """An entry left out after all: its content may come from another entry."""
        self._seen.discard(entry.content.strip())
