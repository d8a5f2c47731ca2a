"""Lorebook activation (which entries go into this turn's prompt, and why) and lorebook search. Pure functions;
how one key matches a text is `domain/card/rules/lore_keys.py`.

SillyTavern's World Info rules where they are defined (shared/reference/sillytavern.md §6.5), Liyuan's defaults
and search scoring (liyuan.md §8). The decisions where those leave room, or where changji departs from them:

* Scan text: an entry scans the newest `scan_depth` messages (its own setting, else its book's; 0 scans no message)
  joined with "\\n", oldest first; recursion passes append the recursion buffer (below).
* Names: `{{char}}`, `{{user}}` and the legacy `<BOT>`, `<USER>` (case-insensitive) are filled into keys before
  matching (escaped when the key is a regular expression, so a name matches literally). Content is returned as
  written; only the recursion buffer and search see it with the names filled. A hit names its key as written,
  before the names are filled, so it can be found in the entry.
* Regular expressions: a key written `/pattern/flags` (flags among g i m s u x y: SillyTavern's `gimsuy` plus
  `x`; `g` and `u` change nothing, `y` anchors at the start of the scan text; a pattern with an unescaped `/` is
  plain text, as in SillyTavern) is a regex search, case-sensitive unless `i`; every key of a `use_regex` entry is
  a pattern too, its case following the entry's (else the book's) case setting. Patterns run under the `regex`
  module's time limit; a search that runs out of time is no match, reported in `timed_out` and not tried again in
  the same call; an invalid pattern is no match. Whole-word matching does not apply to patterns.
* Whole words and Chinese: CJK text (Han, kana, Hangul) has no spaces between words, so an end of a key that is a
  CJK character needs no boundary: keys made of CJK characters match as substrings. An end of a key that is a
  letter, digit, mark or `_` of any other script must not touch such a character in the text; a CJK character or
  punctuation beside it is a boundary ("Seraphina" matches in "我见到了Seraphina。" and in "Eldoria's", "wood"
  does not match in "woodland"). Multi-word keys get the same test at both ends of the phrase (SillyTavern falls
  back to substring matching for them).
* Secondary keys (`selective` entries with secondary keys) follow `logic` and are matched like the primary keys,
  also for `use_regex` entries (SillyTavern's behaviour; the V3 spec's note that they are ignored is not followed).
  `and_any` and `and_all` name the secondary key that satisfied them (for `and_all`, the first).
* Hits are kept up to the largest `max_hits` of the books given. Which are kept: direct hits before recursion
  hits, then those whose key is in the newest message before those found only further back (the entry the user
  just named is never crowded out by names in the greeting or older turns), then by `order`, book position, entry
  position; the kept hits go into the prompt by `order` (lower first), book position, entry position.
* Recursion (books with `recursive`): the content of every keyword hit so far, from any book, is the recursion
  buffer; further passes, up to the book's `max_recursion`, scan that book's entries not yet activated over their
  messages plus the buffer. Constant entries do not feed the buffer (they are in every prompt, so they would
  trigger the same entries every turn).
* Duplicates: an entry whose trimmed content equals one already activated (a constant, or a hit of an earlier book
  or pass) does not activate again; the first book wins. Empty content is never a duplicate.
* Search (`search_lore`) also finds constant entries and skips duplicate content the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain.card.lore import LoreActivation, LoreBookView, LoreEntry, LoreHit, LoreScan
from domain.card.rules.lore_keys import (
    CJK,
    CJK_PIECES,
    LETTERS_AND_DIGITS,
    REGEX_BUDGET,
    REGEX_SECONDS,
    Key,
    Matcher,
    Rule,
    Text,
    key_of,
    secondary_allows,
)
from domain.macros import fill_macros

__all__ = [
    "LoreActivation",
    "LoreBookView",
    "activate",
    "constant_entries",
    "search_lore",
    "search_terms",
]


@dataclass(frozen=True, slots=True)
class _Prepared:
    """An enabled entry of a book, ready to match: how, its keys, its scan depth (made once per book and names)."""

    entry_index: int
    entry: LoreEntry
    rule: Rule
    depth: int
    keys: tuple[Key, ...]
    secondaries: tuple[Key, ...]


@dataclass(frozen=True, slots=True)
class _Candidate:
    book_index: int
    book: LoreBookView
    prepared: _Prepared

    @property
    def entry(self) -> LoreEntry:
        return self.prepared.entry

    @property
    def depth(self) -> int:
        return self.prepared.depth

    @property
    def place(self) -> tuple[int, int, int]:
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


def _prepare(book: LoreBookView, char: str, user: str) -> list[_Prepared]:
    out: list[_Prepared] = []
    slow: set[tuple[int, str]] = set()
    for index, entry in enumerate(book.entries):
        if not entry.enabled:
            continue
        rule = _rule(book, entry, slow)
        keys = tuple(k for key in entry.keys if (k := key_of(key, rule, char, user)) is not None)
        secondaries = tuple(k for key in entry.secondary_keys if (k := key_of(key, rule, char, user)) is not None)
        depth = book.scan.scan_depth if entry.scan_depth is None else entry.scan_depth
        out.append(_Prepared(index, entry, rule, depth, keys, secondaries))
    return out


_PREPARED: dict[tuple[int, str, str], tuple[Sequence[LoreEntry], LoreScan, str, list[_Prepared]]] = {}
_PREPARED_MAX = 1024


def _prepared(book: LoreBookView, char: str, user: str) -> list[_Prepared]:
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
    prepared = _prepare(book, char, user)
    _PREPARED[key] = (book.entries, book.scan, book.book_id, prepared)
    return prepared


def _fire(candidate: _Candidate, text: Text, matcher: Matcher) -> tuple[str, str | None] | None:
    """The primary key that fired and the secondary key that allowed it, or None."""
    prepared = candidate.prepared
    rule, entry = prepared.rule, prepared.entry
    key = matcher.first(prepared.keys, text, rule)
    if key is None:
        return None
    if not entry.selective or not prepared.secondaries:
        return key, None
    by_key = {k.written: k for k in prepared.secondaries}
    allowed, secondary = secondary_allows(
        entry.logic, list(by_key), lambda written: matcher.matches(by_key[written], text, rule)
    )
    return (key, secondary) if allowed else None


class _Contents:
    """Trimmed contents already activated: a duplicate activates once."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def claim(self, entry: LoreEntry) -> bool:
        content = entry.content.strip()
        if content and content in self._seen:
            return False
        self._seen.add(content)
        return True


class _ScanTexts:
    """The scan text for each (depth, recursion buffer) asked for, built once."""

    def __init__(self, messages: Sequence[str]) -> None:
        self._messages = list(messages)
        self._built: dict[tuple[int, int], Text] = {}
        self.buffer: list[str] = []

    def text(self, depth: int, level: int) -> Text:
        if (depth, level) not in self._built:
            window = self._messages[-depth:] if depth > 0 else []
            self._built[depth, level] = Text.of("\n".join(window + (self.buffer if level else [])))
        return self._built[depth, level]


def _candidates(books: Sequence[LoreBookView], char: str, user: str) -> list[_Candidate]:
    return [
        _Candidate(b, book, prepared)
        for b, book in enumerate(books)
        for prepared in _prepared(book, char, user)
        if prepared.entry.uid not in book.excluded
    ]


def _constants(candidates: Sequence[_Candidate], contents: _Contents) -> tuple[LoreHit, ...]:
    chosen = [c for c in candidates if c.entry.constant and contents.claim(c.entry)]
    chosen.sort(key=lambda c: c.place)
    return tuple(LoreHit(c.book.book_id, c.entry, None) for c in chosen)


def _keyword_hits(
    candidates: Sequence[_Candidate], texts: _ScanTexts, matcher: Matcher, contents: _Contents, *, char: str, user: str
) -> list[tuple[_Candidate, LoreHit]]:
    pending = [c for c in candidates if not c.entry.constant and c.prepared.keys]
    found: list[tuple[_Candidate, LoreHit]] = []
    level = 0
    while pending:
        new = [(c, hit) for c in pending if (hit := _hit(c, texts.text(c.depth, level), matcher, level))]
        new = [(c, hit) for c, hit in new if contents.claim(c.entry)]
        fired = {id(c) for c, _ in new}
        found += new
        level += 1
        texts.buffer += [fill_macros(c.entry.content, char, user) for c, _ in new]
        pending = [c for c in pending if id(c) not in fired and _recurses(c, level)] if new else []
    return found


def _hit(candidate: _Candidate, text: Text, matcher: Matcher, level: int) -> LoreHit | None:
    fired = _fire(candidate, text, matcher)
    if fired is None:
        return None
    return LoreHit(candidate.book.book_id, candidate.entry, fired[0], fired[1], level)


def _messages_back(candidate: _Candidate, hit: LoreHit, messages: Sequence[str], matcher: Matcher) -> int:
    """How many messages back from the newest the hit's key is found (its scan depth when only the recursion
    buffer or the messages together hold it)."""
    depth = candidate.depth
    key = next((k for k in candidate.prepared.keys if k.written == hit.key), None)
    if hit.recursion or key is None or depth <= 0:
        return depth
    for back, message in enumerate(reversed(messages[-depth:])):
        if matcher.matches(key, Text.of(message), candidate.prepared.rule):
            return back
    return depth


def _recurses(candidate: _Candidate, level: int) -> bool:
    return candidate.book.scan.recursive and level <= candidate.book.scan.max_recursion


def constant_entries(books: Sequence[LoreBookView]) -> tuple[LoreHit, ...]:
    """The enabled constant entries of `books` by order (duplicate content once, the first book's): what
    `activate` gives as `constants`, without scanning for the rest."""
    contents = _Contents()
    chosen = [
        (entry.order, b, i, book, entry)
        for b, book in enumerate(books)
        for i, entry in enumerate(book.entries)
        if entry.enabled and entry.constant and entry.uid not in book.excluded and contents.claim(entry)
    ]
    chosen.sort(key=lambda c: c[:3])
    return tuple(LoreHit(book.book_id, entry, None) for *_, book, entry in chosen)


def activate(
    books: Sequence[LoreBookView],
    messages: Sequence[str],
    *,
    char: str,
    user: str,
    regex_timeout: float = REGEX_SECONDS,
    clock: Callable[[], float] | None = None,
    regex_budget: float = REGEX_BUDGET,
) -> LoreActivation:
    """The entries of `books` (in precedence order: the card's book first) that this turn's prompt carries, given
    the path's messages oldest→newest (each formatted "Name: text"). `clock` (seconds, monotonic): with one, the
    activation's regex keys share `regex_budget` seconds."""
    matcher = Matcher(timeout=regex_timeout, clock=clock, budget=regex_budget)
    contents = _Contents()
    candidates = _candidates(books, char, user)
    constants = _constants(candidates, contents)
    found = _keyword_hits(candidates, _ScanTexts(messages), matcher, contents, char=char, user=user)
    max_hits = max((book.scan.max_hits for book in books), default=0)
    kept = found
    if len(found) > max_hits:  # (how recent each hit is matters only when some must go)
        back = {id(c): _messages_back(c, hit, messages, matcher) for c, hit in found}
        kept = sorted(found, key=lambda f: (f[1].recursion, back[id(f[0])], *f[0].place))[:max_hits]
    kept = sorted(kept, key=lambda f: f[0].place)
    return LoreActivation(
        constants=constants,
        hits=tuple(hit for _, hit in kept),
        not_kept=len(found) - len(kept),
        timed_out=tuple(matcher.timed_out),
    )


def search_terms(query: str) -> list[str]:
    """The query's search terms, case-folded, each once, of two or more characters: its runs of letters and digits;
    within a run that holds CJK text (no spaces to split on), every CJK run with its overlapping character bigrams
    and the other pieces between them ("去Eldoria的路": "去eldoria的路", "eldoria", "的路")."""
    terms: list[str] = []
    for token in LETTERS_AND_DIGITS.findall(query.casefold()):
        terms.append(token)
        if CJK.search(token):
            for piece in CJK_PIECES.findall(token):
                terms.append(piece)
                if CJK.match(piece):
                    terms += [piece[i : i + 2] for i in range(len(piece) - 1)]
    return list(dict.fromkeys(term for term in terms if len(term) >= 2))


def _score(entry: LoreEntry, terms: Sequence[str], *, char: str, user: str) -> int:
    keys = [fill_macros(k, char, user).strip().casefold() for k in (*entry.keys, *entry.secondary_keys)]
    keys = [k for k in keys if k]
    title = fill_macros(entry.title or (entry.keys[0] if entry.keys else ""), char, user).casefold()
    content = fill_macros(entry.content, char, user).casefold()
    return sum(_term_score(term, keys, title, content) for term in terms)


def _term_score(term: str, keys: Sequence[str], title: str, content: str) -> int:
    by_key = 5 if any(term in key or key in term for key in keys) else 0
    return by_key + (3 if term in title else 0) + min(3, content.count(term))


def search_lore(
    books: Sequence[LoreBookView], query: str, *, char: str, user: str, limit: int = 3
) -> list[tuple[int, str, LoreEntry]]:
    """The enabled entries that best match `query`, best first, as (score, book_id, entry), at most `limit`.
    Per term: +5 when a key or secondary key contains it or is contained in it, +3 when the title (else the first
    key) contains it, +1 per occurrence in the content (at most 3). Ties go to the lower order."""
    terms = search_terms(query)
    if not terms or limit <= 0:
        return []
    contents = _Contents()
    scored = [
        (score, c)
        for c in _candidates(books, char, user)
        if (score := _score(c.entry, terms, char=char, user=user)) and contents.claim(c.entry)
    ]
    scored.sort(key=lambda s: (-s[0], *s[1].place))
    return [(score, c.book.book_id, c.entry) for score, c in scored[:limit]]
