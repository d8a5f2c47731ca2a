"""What an activation is given beside the books and the messages: the lore budget, what it knows of the turn
(the node its draws are seeded by, the chat's length, the minimum of activations, the timers at work), and
the draws themselves."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from domain.card.lore import LoreEntry


@dataclass(frozen=True, slots=True)
class LoreBudget:
    """The tokens lore may take in a context, and what an entry costs there. `constants`: the constant
    entries are charged first (they are in the system prompt changji builds)."""

    tokens: int
    cost: Callable[[LoreEntry], int]
    constants: bool = True
    key: object = None  # what `cost` depends on, for what is kept per budget (hashable)


@dataclass(frozen=True, slots=True)
class LoreTurn:
    """What activation knows of the turn: `seed`, the node the context is at (the same node draws the same
    numbers: a regenerate or a swipe sees the draws its turn saw); `messages`, the chat's length so far (an
    entry's `delay`; None: no entry is delayed); the minimum of activations, and how deep its scan may go
    (0: every message given); the timers at work (`lore_timers.py`)."""

    seed: str = ""
    messages: int | None = None
    min_activations: int = 0
    min_depth: int = 0
    sticky: frozenset[tuple[str, int]] = frozenset()  # (book, uid) of the entries a sticky timer keeps in
    cooling: frozenset[tuple[str, int]] = frozenset()  # those a cooldown keeps out


def draw(seed: str, what: str) -> float:
    """A number in [0, 100) drawn for `what` at `seed`: the same for the same two, spread evenly."""
    digest = hashlib.blake2b(f"{seed}\x1f{what}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * 100
