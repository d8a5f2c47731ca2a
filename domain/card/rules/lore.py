"""Lorebook activation (which entries go into this turn's prompt, and why) and lorebook search. Pure functions;
how one key matches a text is `domain/card/rules/lore_keys.py`, the passes of an activation
`lore_activation.py`.

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
* Passes (`lore_activation.py`): the first scans each entry's messages; a recursion pass follows while the
  last pass's kept hits fed the recursion buffer and some book is `recursive` within its `max_recursion` steps:
  the content of every kept hit (from any book) but those marked `preventRecursion` is the buffer, and a
  recursion pass scans an entry's messages plus the buffer. `excludeRecursion` entries take part in the first
  pass only; `delayUntilRecursion` entries (true, or the stage number) only in recursion passes, from their
  stage on: the lowest stage is the first recursion's, and once no pass would follow, the next stage's pass
  comes whether the book recurses or not (each stage once, as SillyTavern passes them).
  Constant entries do not feed the buffer (they are in every prompt, so they would trigger the same entries
  every turn).
* Each pass's hits go, in turn, through: `delay` (an entry fires only once the chat has that many messages);
  inclusion groups (`group`, names separated by commas: no member where the group has an entry in already, a
  constant one included; else the `groupOverride` member of the highest `order`; else one drawn by
  `groupWeight`, 100 by default); probability (`useProbability` and `probability` below 100: kept when the
  draw, 0–100, is below it); and the token budget (below). A hit left out by any of them is out for the
  turn, and the explain list says why. Group scoring (`useGroupScoring`, per entry) keeps, among the
  members that score, those that match the most keys, before the rest. Sticky and cooldown timers
  (`lore_timers.py`): a sticky entry is in whatever its keys, draw and recursion flags say (not past its
  delay, its group's other sticky members or the budget, where it goes first); a cooling one is out.
* Draws are not random: each is a hash of the node the context is at (`LoreTurn.seed`) and of the entry (or
  the group), spread evenly over 0–100. So a context is the same every time it is read, a regenerate or a
  swipe at the same node sees the same draws, and the next turn draws afresh. The explain list shows each
  draw.
* Budget (SillyTavern's `world_info_budget` and its cap, the story settings `lore_budget` and `lore_tokens`):
  constant entries are charged first (changji keeps them all: the system prompt stays byte-stable for a card
  revision), then each pass's hits; when a pass's hits do not all fit, those whose key is in the newest
  message go first (the entry the user just named is never crowded out by names in the greeting or older
  turns), then the higher `order`, book position, entry position; the first hit that does not fit ends the
  activation, as SillyTavern's overflow does. The kept hits go into the prompt by `order` (lower first),
  book position, entry position. `max_hits`, which older lorebooks carry, is not read.
* Minimum activations (`lore_min_activations`): while fewer entries are in, the scan goes one message deeper
  and scans again (straight to the next depth whose text holds a key's text: the passes between fire
  nothing), each entry's scan up to `lore_min_depth` messages (0: all those given); an entry with a scan depth
  of its own does not go deeper.
* Duplicates: an entry whose trimmed content equals one already activated (a constant, or a hit of an earlier book
  or pass) does not activate again; the first book wins. Empty content is never a duplicate.
* Search (`search_lore`) also finds constant entries and skips duplicate content the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.card.lore import LoreActivation, LoreBookView, LoreEntry, LoreHit
from domain.card.rules.lore_activation import activate
from domain.card.rules.lore_entries import Contents, candidates
from domain.card.rules.lore_inputs import LoreBudget, LoreTurn, draw
from domain.card.rules.lore_keys import CJK, CJK_PIECES, LETTERS_AND_DIGITS
from domain.macros import fill_macros

__all__ = [
    "LoreActivation",
    "LoreBookView",
    "LoreBudget",
    "LoreTurn",
    "activate",
    "constant_entries",
    "draw",
    "search_lore",
    "search_terms",
]


def constant_entries(books: Sequence[LoreBookView]) -> tuple[LoreHit, ...]:
    """The enabled constant entries of `books` by order (duplicate content once, the first book's): what
    `activate` gives as `constants`, without scanning for the rest."""
    contents = Contents()
    chosen = [
        (entry.order, b, i, book, entry)
        for b, book in enumerate(books)
        for i, entry in enumerate(book.entries)
        if entry.enabled and entry.constant and entry.uid not in book.excluded and contents.claim(entry)
    ]
    chosen.sort(key=lambda c: c[:3])
    return tuple(LoreHit(book.book_id, entry, None) for *_, book, entry in chosen)


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
    contents = Contents()
    scored = [
        (score, c)
        for c in candidates(books, char, user)
        if (score := _score(c.entry, terms, char=char, user=user)) and contents.claim(c.entry)
    ]
    scored.sort(key=lambda s: (-s[0], *s[1].place))
    return [(score, c.book.book_id, c.entry) for score, c in scored[:limit]]
