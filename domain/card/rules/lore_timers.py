"""Sticky and cooldown timers (SillyTavern's timed effects) as a projection of the path, like the scene: what
the entries did at the turns before a node decides which a sticky timer keeps in there and which a cooldown
keeps out, so a branch has its own timers and a regenerate sees what its turn saw. Pure functions.

SillyTavern's rules, counted in messages (a turn is two): an entry with `sticky` N or `cooldown` N that comes
in at a chat of L messages starts a timer [L, L + N), unless one of its kind is running; a timer is at work
while the chat is longer than its start and shorter than its end. A sticky entry comes in whatever its keys,
probability or recursion flags say (not past its `delay`, its group's other sticky members or the budget); a
cooling one stays out. When a sticky timer ends (looked at when the next turn is asked for), an entry with a
cooldown starts one then, at work at once.

What changji decides: the timers are folded, from no timer at all, over the turns the context's window holds
(a user's words and the messages before them, scanned as at that turn, its draws seeded by its node) since
the last multiple of the horizon (twice the longest sticky plus cooldown of the books) at least one horizon
back — or since the window's oldest turn, where the window starts later. The entries are those of the books
as they are now (an edit of a book changes the timers it gives, as it changes what fires). A fold is kept
under a digest of everything it read (the books and budget, its start, and each turn's node, length and
scanned messages, in order), so a kept fold is the one a fresh fold would give: a context is the same
whenever it is read, and the next turn folds one turn more."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from domain.card.lore import LoreActivation, LoreBookView, extras_of
from domain.card.rules.lore_inputs import LoreTurn

Key = tuple[str, int]  # (book, uid)


@dataclass(frozen=True, slots=True)
class Timer:
    start: int
    end: int
    protected: bool = False  # a cooldown started as its sticky timer ended: at work from its first message

    def at_work(self, length: int) -> bool:
        return self.start < length < self.end or (self.protected and length == self.start)


@dataclass(frozen=True, slots=True)
class LoreTimers:
    sticky: Mapping[Key, Timer]
    cooldown: Mapping[Key, Timer]

    def at(self, length: int) -> tuple[frozenset[Key], frozenset[Key]]:
        """The entries kept in and kept out at a chat of `length` messages."""
        return (
            frozenset(k for k, t in self.sticky.items() if t.at_work(length)),
            frozenset(k for k, t in self.cooldown.items() if t.at_work(length)),
        )


NO_TIMERS = LoreTimers({}, {})


@dataclass(frozen=True, slots=True)
class PastTurn:
    """A turn before the context's node: its node (the draws' seed), the chat's length there and the messages
    its lore scanned (oldest first)."""

    seed: str
    length: int
    messages: tuple[str, ...]


def durations(books: Sequence[LoreBookView]) -> dict[Key, tuple[int, int]]:
    """(sticky, cooldown) of each enabled entry that has either."""
    out = {}
    for book in books:
        for entry in book.entries:
            extras = extras_of(entry)
            if entry.enabled and entry.uid not in book.excluded and (extras.sticky or extras.cooldown):
                out[book.book_id, entry.uid] = (extras.sticky, extras.cooldown)
    return out


def horizon(timed: Mapping[Key, tuple[int, int]]) -> int:
    """How far back the fold reaches at least, in messages: twice the longest sticky plus cooldown (0: no timed
    entry)."""
    return 2 * max((sticky + cooldown for sticky, cooldown in timed.values()), default=0)


def checked(timers: LoreTimers, length: int, timed: Mapping[Key, tuple[int, int]]) -> LoreTimers:
    """The timers as a turn at `length` finds them: those ended dropped, a cooldown started where a sticky
    timer ended."""
    sticky, cooldown = {}, {k: t for k, t in timers.cooldown.items() if length < t.end}
    for key, timer in timers.sticky.items():
        if length < timer.end:
            sticky[key] = timer
        elif (pause := timed.get(key, (0, 0))[1]) > 0:
            cooldown[key] = Timer(length, length + pause, protected=True)
    return LoreTimers(sticky, cooldown)


def started(
    timers: LoreTimers, activation: LoreActivation, length: int, timed: Mapping[Key, tuple[int, int]]
) -> LoreTimers:
    """The timers once the entries a turn at `length` took in have started theirs."""
    sticky, cooldown = dict(timers.sticky), dict(timers.cooldown)
    for hit in (*activation.constants, *activation.hits):
        key = (hit.book_id, hit.entry.uid)
        stays, pause = timed.get(key, (0, 0))
        if stays and key not in sticky:
            sticky[key] = Timer(length, length + stays)
        if pause and key not in cooldown:
            cooldown[key] = Timer(length, length + pause)
    return LoreTimers(sticky, cooldown)


Run = Callable[[Sequence[str], LoreTurn], LoreActivation]


def _digest(before: bytes, step: PastTurn) -> bytes:
    """What a fold has read, one turn more."""
    hashed = hashlib.blake2b(before, digest_size=16)
    for part in (step.seed, str(step.length), *step.messages):
        hashed.update(part.encode())
        hashed.update(b"\x1f")
    return hashed.digest()


_AFTER: dict[tuple[object, bytes], LoreTimers] = {}  # (signature, digest of the turns folded) → timers after them
_AFTER_MAX = 4096


def timed_turn(
    turn: LoreTurn,
    past: Sequence[PastTurn],
    timed: Mapping[Key, tuple[int, int]],
    run: Run,
    signature: object,
) -> LoreTurn:
    """`turn` with the entries its timers keep in and out, folded over the `past` turns (oldest first) within
    the horizon; `run(messages, turn)` activates as the context does; `signature`: what the fold depends on
    beside the turns (the books and the budget), for the folds kept per node."""
    if not timed or turn.messages is None:
        return turn
    length, reach = turn.messages, horizon(timed)
    start = (length - reach) // reach * reach if length > reach else 0
    within = [p for p in past if start < p.length < length]
    digests, digest = [], str(start).encode()
    for step in within:
        digest = _digest(digest, step)
        digests.append(digest)
    timers, begin = NO_TIMERS, 0
    for i in range(len(within) - 1, -1, -1):  # the newest fold kept, to go on from
        kept = _AFTER.get((signature, digests[i]))
        if kept is not None:
            timers, begin = kept, i + 1
            break
    for i in range(begin, len(within)):
        step = within[i]
        timers = checked(timers, step.length, timed)
        sticky, cooling = timers.at(step.length)
        asked = replace(turn, seed=step.seed, messages=step.length, sticky=sticky, cooling=cooling)
        timers = started(timers, run(step.messages, asked), step.length, timed)
        if len(_AFTER) >= _AFTER_MAX:
            del _AFTER[next(iter(_AFTER))]
        _AFTER[signature, digests[i]] = timers
    sticky, cooling = checked(timers, length, timed).at(length)
    return replace(turn, sticky=sticky, cooling=cooling)
