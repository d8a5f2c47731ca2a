"""The context for the next turn: OpenAI `messages` plus an explain list of where every part came from.

Layers: the system prompt built from the card; once the story is compacted, one user message of
summary layers (`summaries.py`); the greeting and the verbatim path (hidden nodes left out); and in
the last user message, before the user's words, the scene at the leaf (`scene.py`) and the card's
post-history instructions. The path is walked from the leaf upward only as far as the token budget
(window − reply reserve) allows (`window.py`), so the cost of an assembly depends on the window,
never on the story's length. A cut is reported, never silent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from operator import attrgetter, eq, itemgetter
from uuid import UUID

from domain.card.lore import LoreBookView
from domain.card.rules.lore import activate, constant_entries
from domain.texts import CONTEXT_TEXTS, ContextTexts
from domain.tree.rules.compaction import NO_LAYERS, Layers, layers_from
from domain.values import CardData, NodeView, StorySettings
from projections.context.lore import ConstantLore, LoreShown, constant_lore, lore_block
from projections.context.recall import recall_block
from projections.context.records import Context, ExplainBlock, Message, TailBlock
from projections.context.scene import tail_blocks
from projections.context.summaries import SummaryBlock, summary_blocks
from projections.context.system_prompt import build_system_prompt, fill_macros
from projections.context.window import (
    COUNTED_TEXTS,
    MESSAGE,
    MESSAGE_OVERHEAD_TOKENS,
    NODE,
    RECALL_LINES,
    TEXT,
    TOKENS,
    RenderCache,
    Rendered,
    Summarized,
    Verbatim,
    Window,
    WindowCache,
    WindowKey,
    extend_window,
    fit_window,
    unfold_episodes,
)
from projections.read_models.scenes import SceneAt
from projections.recall.story_index import Hit

_ROLE, _ID = attrgetter("role"), attrgetter("id")
_NODE, _TEXT, _TOKENS, _MESSAGE = itemgetter(NODE), itemgetter(TEXT), itemgetter(TOKENS), itemgetter(MESSAGE)


@dataclass(frozen=True, slots=True)
class _CountedSummary:
    block: SummaryBlock
    tokens: int


def assemble_context(
    card: CardData,
    settings: StorySettings,
    upward: Iterable[NodeView],
    cache: RenderCache,
    windows: WindowCache | None = None,
    epoch: int = 0,
    scene: SceneAt | None = None,
    load: Callable[[UUID], NodeView] | None = None,
    summarized: bool = True,
    recall: Callable[[int, frozenset[str]], Sequence[Hit]] | None = None,
    recorded: Summarized = (),
    lore: Sequence[LoreBookView] = (),
    lore_bodies: bool = False,
    lore_lookup: bool = False,
    fixed_prompt: str | None = None,
    clock: Callable[[], float] | None = None,
) -> Context:
    """Assemble the next-turn context from the path read leaf→root (`upward`, consumed lazily).

    Whole turns are taken newest first while they fit the budget; the first turn that does not fit
    and everything older is cut from this request (and reported). With `windows`, the walk stops at
    the nearest ancestor whose window is cached and extends it. The walk also stops at the last
    summarized node; `summarized=False` (the story has no summary anywhere) spares a cut context the
    walk further up that looks for one.

    `recall(before_depth, shown_episodes)`: passages recalled for the user's words from outside the
    window (the window starts at `before_depth`; the nodes whose episode summaries the context shows
    are `shown_episodes`), asked for only when something of the path is outside it; they take up to
    `settings.recall_tokens` from the window's share, in the last user message. `recorded`: the
    story's summaries as recorded so far (`Changji.summarized`), against which cached windows are checked.
    `lore`: the card's books; their constant entries go into the system prompt, the entries whose keys
    the newest messages of the window name into the last user message (`lore_bodies`: in full, within the
    `lore_tokens` setting, else by title; `lore_lookup`: the model can look them up with `lorebook_search`).
    `fixed_prompt`: the system prompt as a client that keeps its own card sent it (the proxy), instead of
    the one built from the card (the card's constant lore is then the client's to send). `clock`: with
    one, the lore's regex keys share one time budget (`domain/card/rules/lore.py`)."""
    char, user = card.name, settings.user_name
    texts = CONTEXT_TEXTS[card.language(settings.language)]
    budget = max(settings.context_window - settings.reply_reserve, 0)
    constants = constant_lore(constant_entries(lore), _filler(char, user)) if lore and fixed_prompt is None else None
    system = fixed_prompt if fixed_prompt is not None else _system_prompt(card, user, texts, constants)
    instructions = fill_macros(card.post_history_instructions, char, user)
    tail = f"{texts.card_tail}{instructions}" if instructions else ""
    iterator = iter(upward)
    leaf = next(iterator, None)
    if leaf is None:
        raise ValueError("a context needs at least the root node")
    ends_with_user = leaf.kind == "user" and not leaf.hidden
    tails = tail_blocks(scene, tail, texts) if ends_with_user else []
    fixed = cache.count(system) + (cache.count(tail) if tail and ends_with_user else 0)
    key = WindowKey(budget - fixed, char, user, epoch)
    window = fit_window(Verbatim(leaf, iterator, summarized), key, cache, windows, recorded)
    if windows is not None and window.settled:
        windows.put(leaf.id, window)
    layers = layers_from(window.boundary, load) if window.boundary is not None and load is not None else NO_LAYERS

    def counted(of: Layers) -> list[_CountedSummary]:
        return _counted(of, load, char, user, texts, cache) if load else []

    def summary_tokens(of: Layers) -> int:
        assert load is not None
        return _summary_tokens(of, load, char, user, texts, epoch, cache)

    if lore and ends_with_user:  # scanned on the newest messages, which any fitting of the window keeps
        scanned = activate(lore, _scanned(window.kept, lore, char, user), char=char, user=user, clock=clock)
        how = LoreShown(lore_bodies, lore_lookup, settings.lore_tokens, cache.count_raw)
        found = lore_block(scanned, lore, texts, how, _filler(char, user))
        if found is not None:
            tails.insert(next((i for i, b in enumerate(tails) if b.what == "instructions"), len(tails)), found)
    scene_tokens = sum(cache.count_raw(block.text) for block in tails if block.what != "instructions")
    recalling = ends_with_user and recall is not None and settings.recall_k > 0 and settings.recall_tokens > 0
    share = settings.recall_tokens if recalling else 0
    fitted, unfolding = (window, layers), settings.fill_window and window.cut_at is None and load is not None

    def filled(reserved: int) -> tuple[Window, Layers, list[_CountedSummary], int]:
        """The window, its summary layers and their tokens (with the scene's) with `reserved` tokens
        left for recall: summarized turns shown word for word again while they fit (`fill_window`)."""
        turns, upper = fitted
        if unfolding:
            assert load is not None
            room = key.budget - scene_tokens - reserved  # room left: fill it word for word
            turns, upper = unfold_episodes(turns, upper, room, summary_tokens, load, cache, windows)
        counted_layers = counted(upper)
        room = key.budget - scene_tokens - _floor(turns)  # the words and the exchange before them come first
        if counted_layers and sum(summary.tokens for summary in counted_layers) > room:  # a small budget
            counted_layers = _shortened(counted_layers, room, cache, texts)
        besides = scene_tokens + sum(summary.tokens for summary in counted_layers)
        if besides:  # the scene and the summaries change as the story goes: fitted after the cached window
            turns = extend_window(turns, [], key._replace(budget=key.budget - besides))
        return turns, upper, counted_layers, besides

    window, layers, summaries, extra = filled(share)
    if recalling:  # recall takes no more than the budget leaves beside the summaries and the last exchange
        share = min(share, max(key.budget - extra - _floor(window), 0))
        recalling = share > 0
    outside = window.cut_at is not None or window.boundary is not None
    if recall is not None and recalling and outside:
        wide = window  # (the share not yet taken from the window)
        window = extend_window(wide, [], key._replace(budget=key.budget - extra - share))
        shown = frozenset(str(node.id) for node, _ in layers.episodes)
        hits = recall(window.kept[0][NODE].depth, shown)
        if len(cache.recall_lines) > RECALL_LINES:
            cache.recall_lines.clear()  # (refilled by the passages that come back)
        block = recall_block(hits, char, user, share, cache.count_line, fill_macros, texts, cache.recall_lines)
        taken = _block_tokens(block, cache) if block is not None else 0
        if taken < share:  # the share the block left is the window's again: older turns word for word
            if unfolding:
                window, layers, summaries, extra = filled(taken)
            window = extend_window(window if unfolding else wide, [], key._replace(budget=key.budget - extra - taken))
            start, shown = window.kept[0][NODE].depth, frozenset(str(node.id) for node, _ in layers.episodes)
            kept = [h for h in hits if int(h.row["depth"]) < start and not (h.episode and h.row["node_id"] in shown)]
            if block is not None and len(kept) < len(hits):  # (those now in the window or its summaries)
                block = recall_block(kept, char, user, taken, cache.count_line, fill_macros, texts, cache.recall_lines)
        if block is not None:
            tails.insert(next((i for i, b in enumerate(tails) if b.what == "instructions"), len(tails)), block)
            extra += _block_tokens(block, cache)
    assembly = _Assembly(cache, budget)
    assembly.open(system, summaries, window.cut_at, layers.covered_depth, window.kept)
    body = window.kept[:-1] if ends_with_user else window.kept  # the leaf's own words are added last, below
    assembly.add_path(body, leaf if ends_with_user else None)
    assembly.add_summaries(summaries)
    if ends_with_user:
        assembly.add_leaf(tails, window.kept[-1])  # the leaf's turn is always kept, and the leaf ends it
    if constants is not None and constants.refs:
        assembly.explain[0] = replace(assembly.explain[0], lore=constants.refs)
    return replace(
        assembly.context(leaf, fixed + extra + window.tokens, window.cut_at, layers, window.kept),
        language=texts.language,
    )


def _block_tokens(block: TailBlock, cache: RenderCache) -> int:
    """A tail block's tokens: as it counted itself, else its text counted."""
    return block.tokens if block.tokens is not None else cache.count_raw(block.text)


def _system_prompt(card: CardData, user: str, texts: ContextTexts, constants: ConstantLore | None) -> str:
    if constants is None:
        return build_system_prompt(card, user, texts)
    return build_system_prompt(card, user, texts, constants.before, constants.after)


def _filler(char: str, user: str) -> Callable[[str], str]:
    return lambda text: fill_macros(text, char, user)


def _scanned(kept: Sequence[Rendered], lore: Sequence[LoreBookView], char: str, user: str) -> list[str]:
    """The newest messages of the window, oldest first, as lore scans them ("Name: text"): as many as the
    deepest scan of the books asks for (each entry takes its own depth of them)."""
    depth = max(
        (
            max([book.scan.scan_depth, *(e.scan_depth or 0 for e in book.entries if e.uid not in book.excluded)])
            for book in lore
        ),
        default=0,
    )
    shown = [item for item in kept if not item[NODE].hidden and item[NODE].text.strip()][-depth:] if depth else []
    return [f"{user if item[NODE].kind == 'user' else char}: {item[TEXT]}" for item in shown]


def leaves_turns_out(
    card: CardData,
    settings: StorySettings,
    upward: Iterable[NodeView],
    cache: RenderCache,
    windows: WindowCache | None,
    epoch: int,
    load: Callable[[UUID], NodeView],
    summarized: bool,
    reserve: int,
    recorded: Summarized = (),
    lore: Sequence[LoreBookView] = (),
    fixed_prompt: str | None = None,
) -> bool:
    """Whether the context at a reply (the path read leaf→root) leaves turns out for the budget, or
    would once `reserve` more tokens are taken (the next turn's recall share): the test a reply's
    write makes before it announces a compaction. Decided on the window of turns below the summaries:
    turns `fill_window` shows again word for word only take room that is left (they are summarized),
    so a context filled to its budget is not one that leaves turns out. Fits the same window (from the
    same cache) as `assemble_context` at that reply, and builds no messages."""
    char, user = card.name, settings.user_name
    texts = CONTEXT_TEXTS[card.language(settings.language)]
    budget = max(settings.context_window - settings.reply_reserve, 0)
    iterator = iter(upward)
    leaf = next(iterator)
    constants = constant_lore(constant_entries(lore), _filler(char, user)) if lore and fixed_prompt is None else None
    system = fixed_prompt if fixed_prompt is not None else _system_prompt(card, user, texts, constants)
    fixed = cache.count(system)
    key = WindowKey(budget - fixed, char, user, epoch)
    window = fit_window(Verbatim(leaf, iterator, summarized), key, cache, windows, recorded)
    if windows is not None and window.settled:
        windows.put(leaf.id, window)
    layers = layers_from(window.boundary, load) if window.boundary is not None else NO_LAYERS
    if window.cut_at is not None and window.cut_at.turn > layers.covered_turn:  # whole turns left out
        return True
    return fixed + _summary_tokens(layers, load, char, user, texts, epoch, cache) + window.tokens + reserve > budget


def _counted(
    layers: Layers, load: Callable[[UUID], NodeView], char: str, user: str, texts: ContextTexts, cache: RenderCache
) -> list[_CountedSummary]:
    """The summary layers' blocks with their tokens (the message's overhead on the first)."""
    blocks = summary_blocks(layers, load, char, user, fill_macros, texts)
    return [
        _CountedSummary(block, cache.count_raw(block.text) + (MESSAGE_OVERHEAD_TOKENS if i == 0 else 0))
        for i, block in enumerate(blocks)
    ]


def _floor(window: Window) -> int:
    """The tokens of the window's last exchange — the turn before the newest and the newest (the user's
    words) — or of what the window holds of them: kept word for word before any summary (a small budget
    shortens the summaries, never the reply being answered)."""
    kept = window.kept
    starts = [i for i, item in enumerate(kept) if item[NODE].kind in ("user", "greeting")]
    first = starts[-2] if len(starts) >= 2 else 0
    return sum(map(_TOKENS, kept[first:]))


def _shortened(
    summaries: list[_CountedSummary], room: int, cache: RenderCache, texts: ContextTexts
) -> list[_CountedSummary]:
    """Summary layers that do not fit `room` tokens (a proxied client's budget may be smaller than the
    story's), cut to fit: the anchors kept whole (starred words are never dropped), the newest layers kept
    whole while they fit, the older ones cut at a line — their first line (its opener, its label) kept —
    with a note saying so. Each layer stays, standing for the turns it covers: at a budget too small for
    even that, the layers' first lines and notes are what is sent."""
    left = max(room, 0) - sum(s.tokens for s in summaries if s.block.what == "anchors")
    kept: list[_CountedSummary] = []
    for i in range(len(summaries) - 1, -1, -1):
        summary = summaries[i]
        if summary.block.what == "anchors":
            kept.append(summary)
            continue
        overhead = MESSAGE_OVERHEAD_TOKENS if i == 0 else 0
        if summary.tokens <= left - _LEAST_FOR_OLDER * i:
            kept.append(summary)
            left -= summary.tokens
            continue
        allowed = left - _LEAST_FOR_OLDER * i - overhead
        text = _cut_to(summary.block.text, allowed, cache, texts.shortened)
        tokens = cache.counter.count(text) + overhead
        why = f"{summary.block.why}; cut to fit the budget"
        kept.append(_CountedSummary(replace(summary.block, text=text, why=why), tokens))
        left -= tokens
    kept.reverse()
    return kept


_LEAST_FOR_OLDER = 24  # tokens kept for each older layer while a newer one is placed (its note, its first line)


def _cut_to(text: str, tokens: int, cache: RenderCache, note: str) -> str:
    """`text`'s first lines that fit `tokens` with `note` after them; its first line at least."""
    lines = text.split("\n")
    low, high = 1, len(lines)  # the most lines that fit, found by halving
    while low < high:
        middle = (low + high + 1) // 2
        if cache.counter.count("\n".join([*lines[:middle], note])) <= tokens:
            low = middle
        else:
            high = middle - 1
    return "\n".join([*lines[:low], note]) if low < len(lines) else text


def _summary_tokens(
    layers: Layers,
    load: Callable[[UUID], NodeView],
    char: str,
    user: str,
    texts: ContextTexts,
    epoch: int,
    cache: RenderCache,
) -> int:
    """What the layers take, remembered by what they are made of (the render epoch covers the anchors
    they quote): trying episodes one by one, and every reply's budget test, ask for the same layers
    turn after turn."""
    made_of = (_made_of(layers), char, user, texts.language, epoch)
    tokens = cache.summaries.get(made_of)
    if tokens is None:
        tokens = cache.summaries[made_of] = sum(s.tokens for s in _counted(layers, load, char, user, texts, cache))
        if len(cache.summaries) > COUNTED_TEXTS:
            del cache.summaries[next(iter(cache.summaries))]
    return tokens


def _made_of(layers: Layers) -> tuple[object, ...]:
    digest = (layers.digest[0].id, layers.digest[0].version) if layers.digest else None
    return (digest, *((node.id, node.version) for node, _ in layers.episodes))


SUMMARY_KINDS = frozenset({"digest", "episode", "anchors"})


def _shifted(block: ExplainBlock, by: int) -> ExplainBlock:
    """A block of message 1 after `by` characters were put before it there."""
    if block.span is None or block.message_index is None:
        return block
    start, end = block.span
    start += by if block.message_index == 1 else 0
    end += by if block.end_message == 1 else 0
    return replace(block, span=(start, end))


@dataclass
class _Assembly:
    """The messages and the explain list, built block by block in order."""

    cache: RenderCache
    budget: int
    messages: list[Message] = field(default_factory=list)
    explain: list[ExplainBlock] = field(default_factory=list)

    def open(
        self,
        system: str,
        summaries: list[_CountedSummary],
        cut_at: NodeView | None,
        covered_depth: int,
        kept: tuple[Rendered, ...],
    ) -> None:
        """The system prompt, then the explain blocks of a budget cut and of the summary layers."""
        self.messages.append(Message("system", system))
        self.explain.append(
            ExplainBlock(
                "system", "card identity and user persona", (), len(system), self.cache.count(system), 0,
                span=(0, len(system)), end_message=0,
            )
        )  # fmt: skip
        if cut_at is not None:
            why = f"over the token budget ({self.budget}): turns up to {cut_at.turn} left out of this request only"
            cut_depths = (covered_depth + 1, kept[0][NODE].depth - 1)  # everything between the summaries and the window
            self.explain.append(ExplainBlock("cut", why, (cut_at.id,), covers=cut_depths))
        for summary in summaries:
            block = summary.block
            self.explain.append(
                ExplainBlock(block.what, block.why, block.node_ids, len(block.text), summary.tokens, 1, block.covers)
            )

    def add_path(self, body: tuple[Rendered, ...], leaf: NodeView | None) -> None:
        """The greeting and the verbatim turns; `leaf`, if given, is left for `add_leaf`."""
        shown = [m for m in map(_MESSAGE, body) if m is not None]
        roles = list(map(_ROLE, shown)) if len(shown) == len(body) else []
        if roles and not any(map(eq, roles, islice(roles, 1, None))):
            self._add_alternating(body, shown)
        else:
            self._add_merging(body, leaf)

    def _add_alternating(self, body: tuple[Rendered, ...], shown: list[Message]) -> None:
        """The usual path: every node shown, roles alternating (nothing to skip or merge), in bulk."""
        first = len(self.messages)
        self.messages += shown
        if body[0][NODE].kind == "greeting":
            self._greeting(*body[0][:3], first)
            body, first = body[1:], first + 1
        nodes = list(map(_NODE, body))
        last = len(self.messages) - 1
        where = ((first, 0), (last, len(self.messages[last].content)))
        self._verbatim(nodes, sum(map(len, map(_TEXT, body))), sum(map(_TOKENS, body)), where)

    def _add_merging(self, body: tuple[Rendered, ...], leaf: NodeView | None) -> None:
        """Hidden nodes left out (and listed), adjacent messages of one role merged into one."""
        verbatim: list[NodeView] = []
        hidden: list[UUID] = []
        chars = tokens = 0
        start: tuple[int, int] | None = None  # (message, offset) where the verbatim turns begin
        end = (0, 0)
        for node, text, item_tokens, message in body:
            if node.hidden:
                hidden.append(node.id)
                continue
            if message is None or node is leaf:
                continue
            if len(self.messages) > 1 and self.messages[-1].role == message.role:
                offset = len(self.messages[-1].content) + 2
                self.messages[-1] = Message(message.role, self.messages[-1].content + "\n\n" + text)
            else:
                offset = 0
                self.messages.append(message)  # made once per node when its turn entered a window
            at = len(self.messages) - 1
            if node.kind == "greeting":
                self._greeting(node, text, item_tokens, at, offset)
            else:
                start = (at, offset) if start is None else start
                end = (at, len(self.messages[at].content))
                verbatim.append(node)
                chars += len(text)
                tokens += item_tokens
        if start is not None:
            self._verbatim(verbatim, chars, tokens, (start, end))
        if hidden:
            self.explain.append(
                ExplainBlock("hidden", "hidden by the user: in the tree, not in the context", tuple(hidden))
            )

    def _greeting(self, node: NodeView, text: str, tokens: int, index: int, offset: int = 0) -> None:
        span = (offset, offset + len(text))
        self.explain.append(
            ExplainBlock(
                "greeting", "the opening line", (node.id,), len(text), tokens, index, span=span, end_message=index
            )
        )

    def _verbatim(
        self, nodes: list[NodeView], chars: int, tokens: int, where: tuple[tuple[int, int], tuple[int, int]]
    ) -> None:
        """The turns word for word, from (message, offset) to (message, offset) `where`."""
        if nodes:
            (first, start), (last, end) = where
            why = f"turns {nodes[0].turn}–{nodes[-1].turn} word for word"
            self.explain.append(
                ExplainBlock(
                    "verbatim", why, tuple(map(_ID, nodes)), chars, tokens, first, span=(start, end), end_message=last
                )
            )

    def add_summaries(self, summaries: list[_CountedSummary]) -> None:
        """One user message right after the system prompt; when the verbatim path opens with the user's
        words, they follow in the same message (roles alternate: strict providers refuse two user
        messages in a row)."""
        if not summaries:
            return
        text = "\n\n".join(summary.block.text for summary in summaries)
        path = ("greeting", "verbatim")
        if len(self.messages) > 1 and self.messages[1].role == "user":
            self.messages[1] = Message("user", text + "\n\n" + self.messages[1].content)
            self.explain = [_shifted(b, len(text) + 2) if b.what in path else b for b in self.explain]
        else:
            self.messages.insert(1, Message("user", text))
            self.explain = [  # the path's blocks moved one message down
                replace(b, message_index=b.message_index + 1, end_message=(b.end_message or 0) + 1)
                if b.message_index is not None and b.what in path
                else b
                for b in self.explain
            ]
        spans, offset = [], 0
        for summary in summaries:
            spans.append((offset, offset + len(summary.block.text)))
            offset += len(summary.block.text) + 2
        placed = iter(spans)
        self.explain = [
            replace(b, span=next(placed), end_message=1) if b.what in SUMMARY_KINDS else b for b in self.explain
        ]

    def add_leaf(self, tails: list[TailBlock], leaf: Rendered) -> None:
        """The last user message: the tail blocks, then the user's words."""
        node, words, tokens, _ = leaf
        content = "\n\n".join([*(block.text for block in tails), words])
        if len(self.messages) > 1 and self.messages[-1].role == "user":
            offset = len(self.messages[-1].content) + 2
            self.messages[-1] = Message("user", self.messages[-1].content + "\n\n" + content)
        else:
            offset = 0
            self.messages.append(Message("user", content))
        last = len(self.messages) - 1
        for block in tails:
            if block.tokens is not None:
                counted = block.tokens
            elif block.what == "instructions":
                counted = self.cache.count(block.text)
            else:
                counted = self.cache.count_raw(block.text)
            span = (offset, offset + len(block.text))
            self.explain.append(
                ExplainBlock(
                    block.what, block.why, block.node_ids, len(block.text), counted, last, scores=block.scores,
                    span=span, end_message=last, lore=block.lore,
                )
            )  # fmt: skip
            offset = span[1] + 2
        span = (offset, offset + len(words))
        self.explain.append(
            ExplainBlock(
                "user", "the user's words, last", (node.id,), len(words), tokens, last, span=span, end_message=last
            )
        )

    def context(
        self, leaf: NodeView, used: int, cut_at: NodeView | None, layers: Layers, kept: tuple[Rendered, ...]
    ) -> Context:
        """`cut_turns` counts the whole turns the budget left out (between the summaries and the window)."""
        if cut_at is None:
            cut_turns = cut_nodes = 0
        else:
            cut_turns = cut_at.turn - layers.covered_turn
            cut_nodes = kept[0][NODE].depth - 1 - layers.covered_depth
        return Context(tuple(self.messages), tuple(self.explain), used, self.budget, leaf.id, cut_turns, cut_nodes)
