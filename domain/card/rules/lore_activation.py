"""Which lore entries a turn's prompt carries, and why the others that fired do not: passes over the newest
messages (then over the recursion buffer, then deeper for the minimum of activations), each pass's hits
through inclusion groups, probability and the token budget. Pure functions; the rules are listed in
`domain/card/rules/lore.py`."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import replace

from domain.card.lore import LeftOut, LoreActivation, LoreBookView, LoreHit
from domain.card.rules.lore_entries import Candidate, Contents, allowed, candidates
from domain.card.rules.lore_inputs import LoreBudget, LoreTurn, draw
from domain.card.rules.lore_keys import REGEX_BUDGET, REGEX_SECONDS, Matcher, Text
from domain.macros import fill_macros


class _ScanTexts:
    """The scan text for each depth and recursion buffer asked for, built once."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        self._built: dict[tuple[int, int], Text] = {}
        self._whole: tuple[Text, list[int], list[int]] | None = None
        self.buffer: list[str] = []

    def text(self, depth: int, level: int) -> Text:
        key = (depth, len(self.buffer) if level else -1)
        if key not in self._built:
            window = self.messages[-depth:] if depth > 0 else []
            self._built[key] = Text.of("\n".join(window + (self.buffer if level else [])))
        return self._built[key]

    def whole(self) -> tuple[Text, list[int], list[int]]:
        """Every message joined, and where each starts in it, as written and case-folded (folding can make a
        text longer: "ß" is "ss")."""
        if self._whole is None:
            starts, folded, at, at_folded = [], [], 0, 0
            for message in self.messages:
                starts.append(at)
                folded.append(at_folded)
                at += len(message) + 1
                at_folded += len(message.casefold()) + 1
            starts.append(at)
            folded.append(at_folded)
            self._whole = (Text.of("\n".join(self.messages)), starts, folded)
        return self._whole

    def since(self, start: int) -> Text:
        """The buffer's contents from the `start`-th on: what a recursion pass's text has that an earlier
        pass's did not."""
        key = (-1 - start, len(self.buffer))
        if key not in self._built:
            self._built[key] = Text.of("\n".join(self.buffer[start:]))
        return self._built[key]


class _Activation:
    """One activation's state: the entries still to fire, those kept and left out, the budget used."""

    def __init__(
        self, books: Sequence[LoreBookView], messages: Sequence[str], matcher: Matcher, budget: LoreBudget | None,
        turn: LoreTurn, char: str, user: str,
    ) -> None:  # fmt: skip
        self.matcher, self.budget, self.turn, self.char, self.user = matcher, budget, turn, char, user
        self.contents = Contents()
        found = candidates(books, char, user)
        constants = sorted((c for c in found if c.entry.constant and self.contents.claim(c.entry)), key=_place)
        self.constants = tuple(LoreHit(c.book.book_id, c.entry, None) for c in constants)
        self.pending = [c for c in found if not c.entry.constant and (c.prepared.keys or _key(c) in turn.sticky)]
        self.kept: list[tuple[Candidate, LoreHit]] = []
        self.left: list[LoreHit] = []
        self.taken_groups = {g for c in constants for g in c.extras.groups}
        self.texts = _ScanTexts(messages)
        self.used = sum(budget.cost(c.entry) for c in constants) if budget is not None and budget.constants else 0
        self.overflow = False
        self.unmatched: dict[int, tuple[int, int]] = {}  # entry → (depth, buffer length) its primary keys missed
        self.reach: dict[int, int] = {}  # entry → the least scan depth that may fire it (the minimum's passes)

    def run(self) -> None:
        skew, delayed = 0, self._delay_levels()  # (the stages come once, the minimum's deeper passes or not)
        stage = delayed.pop(0) if delayed else 0  # the recursion stage `delayUntilRecursion` entries wait for
        while True:
            level = 0
            while True:
                if self._scan(level, stage, skew) and not self.overflow:
                    level += 1
                elif delayed and not self.overflow:  # nothing more to recurse on: the next stage's entries' turn
                    level, stage = level + 1, delayed.pop(0)
                else:
                    break
            wanted = self.turn.min_activations
            if self.overflow or not wanted or len(self.constants) + len(self.kept) >= wanted or not self.pending:
                return
            deeper = self._deeper(skew)  # too few: deeper, as far as the next message that can fire an entry
            if deeper is None:
                return
            skew = deeper

    def _deeper(self, skew: int) -> int | None:
        """The least skew past `skew` at which a pending entry's scan text holds one of its keys' texts (the
        passes between would fire nothing: their texts hold none), each entry's scan within the chat and
        `min_depth` (several books may scan to several depths); None when there is none. An entry with a scan
        depth of its own does not go deeper (SillyTavern's way)."""
        messages = len(self.texts.messages)
        limit = min(self.turn.min_depth or messages, messages)
        least = None
        for candidate in self.pending:
            if candidate.entry.scan_depth is not None:
                continue
            base = candidate.book.scan.scan_depth
            reach = self.reach.get(id(candidate))
            if reach is None or reach <= base + skew:
                reach = self._reach(candidate, base + skew)
                self.reach[id(candidate)] = reach
            if reach <= limit and (least is None or reach - base < least):
                least = reach - base
        return least

    def _reach(self, candidate: Candidate, depth: int) -> int:
        """The least scan depth past `depth` whose text may fire the entry: where the newest of its keys' texts
        lies in the messages older than `depth` (plain keys); the next depth for patterns and for an entry
        whose key is in already but not its secondary keys; past the chat when none is there."""
        ready, messages = candidate.prepared, len(self.texts.messages)
        if not ready.plain or (id(candidate) not in self.unmatched and ready.secondaries):
            return depth + 1
        whole, raw_starts, folded_starts = self.texts.whole()
        sensitive = ready.rule.case_sensitive
        haystack, starts = (whole.raw, raw_starts) if sensitive else (whole.folded, folded_starts)
        if depth >= messages:
            return messages + 1
        end = starts[messages - depth] - 1  # (the messages older than the newest `depth`, without the line break)
        found = max((haystack.rfind(needle, 0, end) for needle in ready.needles), default=-1)
        if found < 0:
            return messages + 1
        return messages - (bisect_right(starts, found) - 1)

    def _deeper_text(self, candidate: Candidate, skew: int) -> bool:
        """Whether a pass of the minimum of activations at `skew` scans a text for the entry that may fire it."""
        if candidate.entry.scan_depth is not None:
            return False
        reach = self.reach.get(id(candidate))
        return reach is None or reach <= candidate.book.scan.scan_depth + skew

    def _delay_levels(self) -> list[int]:
        return sorted({c.extras.delay_until_recursion for c in self.pending} - {0})

    def _scan(self, level: int, stage: int, skew: int) -> bool:
        """One pass (`level` 0: the messages; later: the messages and the recursion buffer, where entries
        delayed until a recursion `stage` up to this one take part); whether a recursion pass follows (its hits
        fed the buffer)."""
        hits: list[tuple[Candidate, LoreHit]] = []
        waiting: list[Candidate] = []
        for candidate in self.pending:
            sticky = _key(candidate) in self.turn.sticky
            if level == 0 and skew and not self._deeper_text(candidate, skew):  # (the same text as before: no fire)
                waiting.append(candidate)
                continue
            if sticky and level == 0:  # kept in by its timer: no key, no draw, no recursion flag asked
                hit = LoreHit(candidate.book.book_id, candidate.entry, None, None, level, sticky=True)
            elif not sticky and _may_fire(candidate, level, stage):
                fired = self._fire(candidate, _depth(candidate, skew), level)
                if fired is None:
                    waiting.append(candidate)
                    continue
                hit = LoreHit(candidate.book.book_id, candidate.entry, fired[0], fired[1], level)
            else:
                waiting.append(candidate)
                continue
            delay = candidate.extras.delay
            if delay and self.turn.messages is not None and self.turn.messages < delay:
                self.left.append(replace(hit, left_out="delay"))
            elif not sticky and _key(candidate) in self.turn.cooling:
                self.left.append(replace(hit, left_out="cooldown"))
            elif self.contents.claim(candidate.entry):
                hits.append((candidate, hit))
        self.pending = waiting
        kept = self._charged(self._rolled(self._grouped(hits, skew)), skew)
        self.kept += kept
        fed = [fill_macros(c.entry.content, self.char, self.user) for c, _ in kept if not c.extras.prevent_recursion]
        self.texts.buffer += fed
        return bool(fed) and any(_recurses(c, level + 1) for c in self.pending)

    def _fire(self, candidate: Candidate, depth: int, level: int) -> tuple[str, str | None] | None:
        """The keys that fired, as `fire` finds them; a recursion pass looks for the primary keys of an entry
        whose messages held none only in what the buffer gained since (the same answer, a fraction of the text)."""
        ready, texts = candidate.prepared, self.texts
        before = self.unmatched.get(id(candidate))
        fresh = level and before is not None and before[0] == depth and ready.plain
        text = texts.since(before[1]) if fresh and before is not None else texts.text(depth, level)
        if ready.plain:  # (none of the keys' texts in it: no key matches, whole word or not)
            haystack = text.raw if ready.rule.case_sensitive else text.folded
            if not any(needle in haystack for needle in ready.needles):
                self.unmatched[id(candidate)] = (depth, len(texts.buffer) if level else 0)
                return None
        if fresh and before is not None:
            if self.matcher.first(ready.keys, text, ready.rule) is None:
                self.unmatched[id(candidate)] = (depth, len(texts.buffer))
                return None
            text = texts.text(depth, level)
        key = self.matcher.first(ready.keys, text, ready.rule)
        if key is None:
            self.unmatched[id(candidate)] = (depth, len(texts.buffer) if level else 0)
            return None
        self.unmatched.pop(id(candidate), None)
        return allowed(candidate, key, text, self.matcher)

    def _leave(self, candidate: Candidate, hit: LoreHit, why: LeftOut, **more: object) -> None:
        self.contents.release(candidate.entry)
        self.left.append(replace(hit, left_out=why, **more))  # type: ignore[arg-type]

    def _score(self, candidate: Candidate, hit: LoreHit, skew: int) -> int:
        """An entry's group score (SillyTavern's): its primary keys found, with its secondary keys found under
        AND_ANY, or all of them under AND_ALL when all are."""
        ready = candidate.prepared
        text = self.texts.text(_depth(candidate, skew), hit.recursion)
        found = sum(self.matcher.matches(k, text, ready.rule) for k in ready.keys)
        if not candidate.entry.selective or not ready.secondaries or candidate.entry.logic in ("not_all", "not_any"):
            return found
        secondary = sum(self.matcher.matches(k, text, ready.rule) for k in ready.secondaries)
        if candidate.entry.logic == "and_all":
            return found + (secondary if secondary == len(ready.secondaries) else 0)
        return found + secondary

    def _grouped(self, hits: list[tuple[Candidate, LoreHit]], skew: int) -> list[tuple[Candidate, LoreHit]]:
        """One entry of each inclusion group: the sticky ones where it has any; else, among those that score
        (`useGroupScoring`), only those that match the most keys; none where the group has one in already;
        else the `group_override` entry of the highest order, else one drawn by `group_weight`."""
        out = hits
        for group in dict.fromkeys(g for c, _ in hits for g in c.extras.groups):
            members = [(c, h) for c, h in out if group in c.extras.groups]
            stuck = [c for c, h in members if h.sticky]
            if stuck:  # sticky members stay, the others go
                for candidate, hit in members:
                    if not hit.sticky:
                        self._leave(candidate, hit, "group", group=group)
                out = [(c, h) for c, h in out if h.sticky or group not in c.extras.groups]
                self.taken_groups.add(group)
                continue
            if any(c.extras.group_scoring for c, _ in members):  # the members that match fewer keys go first
                scores = {id(c): self._score(c, h, skew) for c, h in members}
                best = max(scores.values())
                for candidate, hit in members:
                    if candidate.extras.group_scoring and scores[id(candidate)] < best:
                        self._leave(candidate, hit, "group", group=group)
                members = [(c, h) for c, h in members if not c.extras.group_scoring or scores[id(c)] == best]
                out = [(c, h) for c, h in out if group not in c.extras.groups or any(c is m for m, _ in members)]
            if group in self.taken_groups:
                winner = None
            elif any(c.extras.group_override for c, _ in members):
                winner = max((m for m in members if m[0].extras.group_override), key=lambda m: m[0].entry.order)[0]
            else:
                winner = _weighted(members, draw(self.turn.seed, f"group\x1f{group}"))
            for candidate, hit in members:
                if candidate is not winner:
                    self._leave(candidate, hit, "group", group=group)
            out = [(c, h) for c, h in out if c is winner or group not in c.extras.groups]
            self.taken_groups.add(group)
        return out

    def _rolled(self, hits: list[tuple[Candidate, LoreHit]]) -> list[tuple[Candidate, LoreHit]]:
        out = []
        for candidate, hit in hits:
            chance = candidate.extras.chance
            if chance >= 100 or hit.sticky:
                out.append((candidate, hit))
                continue
            roll = draw(self.turn.seed, f"{candidate.book.book_id}\x1f{candidate.entry.uid}")
            if roll < chance:
                out.append((candidate, replace(hit, roll=roll)))
            else:
                self._leave(candidate, hit, "probability", roll=roll)
        return out

    def _charged(self, hits: list[tuple[Candidate, LoreHit]], skew: int) -> list[tuple[Candidate, LoreHit]]:
        """The hits within the budget: when not all fit, the hits named in the newest messages first, then
        the higher `order`; the first that does not fit ends the activation (SillyTavern's overflow)."""
        if self.budget is None or not hits:
            return hits
        costs = {id(c): self.budget.cost(c.entry) for c, _ in hits}
        if self.used + sum(costs.values()) > self.budget.tokens:
            back = {id(c): self._messages_back(c, h, skew) for c, h in hits}
            hits = sorted(
                hits, key=lambda f: (not f[1].sticky, back[id(f[0])], -f[0].entry.order, f[0].book_index, _place(f[0]))
            )
        out = []
        for candidate, hit in hits:
            if self.overflow or self.used + costs[id(candidate)] > self.budget.tokens:
                self.overflow = True
                self._leave(candidate, hit, "budget")
                continue
            self.used += costs[id(candidate)]
            out.append((candidate, hit))
        return out

    def _messages_back(self, candidate: Candidate, hit: LoreHit, skew: int) -> int:
        """How many messages back from the newest the hit's key is (its depth when only the buffer, or the
        messages together, hold it)."""
        depth = _depth(candidate, skew)
        key = next((k for k in candidate.prepared.keys if k.written == hit.key), None)
        if hit.recursion:  # (a recursion pass's hits: all alike, by order)
            return 0
        if key is None or depth <= 0:
            return depth
        for back, message in enumerate(reversed(self.texts.messages[-depth:])):
            if self.matcher.matches(key, Text.of(message), candidate.prepared.rule):
                return back
        return depth


def _key(candidate: Candidate) -> tuple[str, int]:
    return candidate.book.book_id, candidate.entry.uid


def _place(candidate: Candidate) -> tuple[int, int, int]:
    return candidate.place


def _depth(candidate: Candidate, skew: int) -> int:
    """The messages an entry scans: its own depth, else its book's, deeper by `skew` (the minimum of
    activations, which an entry's own depth does not follow)."""
    if candidate.entry.scan_depth is not None:
        return candidate.entry.scan_depth
    return candidate.book.scan.scan_depth + skew


def _may_fire(candidate: Candidate, level: int, stage: int) -> bool:
    """Whether the entry takes part in a pass: recursion passes only in recursive books and within their steps
    (but those of a stage of delayed entries, which come whether the book recurses or not: SillyTavern's way),
    `exclude_recursion` entries only in the first, `delay_until_recursion` ones from their stage on."""
    extras = candidate.extras
    if level == 0:
        return not extras.delay_until_recursion
    if extras.exclude_recursion or extras.delay_until_recursion > stage:
        return False
    return bool(extras.delay_until_recursion) or _recurses(candidate, level)


def _recurses(candidate: Candidate, level: int) -> bool:
    return candidate.book.scan.recursive and level <= candidate.book.scan.max_recursion


def _weighted(members: Sequence[tuple[Candidate, LoreHit]], roll: float) -> Candidate | None:
    """The member a draw (0–100) picks, each with a share of the range by its `group_weight`."""
    total = sum(c.extras.group_weight for c, _ in members)
    if total <= 0:
        return members[0][0] if members else None
    point, reached = roll / 100 * total, 0.0
    for candidate, _ in members:
        reached += candidate.extras.group_weight
        if point < reached:
            return candidate
    return members[-1][0]


def activate(
    books: Sequence[LoreBookView],
    messages: Sequence[str],
    *,
    char: str,
    user: str,
    budget: LoreBudget | None = None,
    turn: LoreTurn = LoreTurn(),
    regex_timeout: float = REGEX_SECONDS,
    clock: Callable[[], float] | None = None,
    regex_budget: float = REGEX_BUDGET,
) -> LoreActivation:
    """The entries of `books` (in precedence order: the card's book first) that this turn's prompt carries, given
    the path's messages oldest→newest (each formatted "Name: text"), and the hits left out. `budget`: None, no
    limit. `clock` (seconds, monotonic): with one, the activation's regex keys share `regex_budget` seconds."""
    matcher = Matcher(timeout=regex_timeout, clock=clock, budget=regex_budget)
    run = _Activation(books, messages, matcher, budget, turn, char, user)
    run.run()
    return LoreActivation(
        constants=run.constants,
        hits=tuple(hit for _, hit in sorted(run.kept, key=lambda f: f[0].place)),
        left_out=tuple(run.left),
        timed_out=tuple(matcher.timed_out),
        tokens=run.used,
    )
