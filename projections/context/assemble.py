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
from dataclasses import replace
from operator import attrgetter, itemgetter
from uuid import UUID

from domain.card.lore import LoreBookView
from domain.card.rules.lore import constant_entries
from domain.texts import CONTEXT_TEXTS, ContextTexts
from domain.tree.rules.compaction import NO_LAYERS, Layers, layers_from
from domain.values import CardData, NodeView, Prelude, StorySettings
from projections.context.lore import (
    ConstantLore,
    LoreShown,
    activated,
    constant_lore,
    depth_blocks,
    lore_block,
    lore_budget,
)
from projections.context.memory_recall import memory_block
from projections.context.message_builder import Assembly
from projections.context.recall import recall_block
from projections.context.records import Context, DepthBlock, ExplainBlock, TailBlock
from projections.context.resident import Resident, resident_tokens, with_resident
from projections.context.scene import tail_blocks
from projections.context.summary_fit import CountedSummary, counted_summaries, layers_tokens, shortened
from projections.context.system_prompt import build_system_prompt, fill_macros
from projections.context.window import (
    MESSAGE,
    NODE,
    RECALL_LINES,
    TEXT,
    TOKENS,
    RenderCache,
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
from projections.recall.card_memory_index import MemoryHit
from projections.recall.story_index import Hit

_ROLE, _ID = attrgetter("role"), attrgetter("id")
_NODE, _TEXT, _TOKENS, _MESSAGE = itemgetter(NODE), itemgetter(TEXT), itemgetter(TOKENS), itemgetter(MESSAGE)


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
    resident: Resident | None = None,
    memory_recall: Callable[[str], Sequence[MemoryHit]] | None = None,
    prelude: Prelude | None = None,
    identity: str = "",
    reanchor: TailBlock | None = None,
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
    `settings.recall_room` from the window's share, and what the window leaves unused (its next turn,
    or the next episode shown word for word, does not fit), in the last user message. `recorded`: the
    story's summaries as recorded so far (`Changji.summarized`), against which cached windows are checked.
    `lore`: the card's books; their constant entries go into the system prompt, the entries whose keys
    the newest messages of the window name into the last user message, within the lore budget (`lore_budget`
    percent of the budget, at most `lore_tokens`; `lore_bodies`: in full, else by title; `lore_lookup`: the model
    can look them up with `lorebook_search`), the draws of their probabilities and groups seeded by the leaf.
    `fixed_prompt`: the system prompt as a client that keeps its own card sent it (the proxy), instead of
    the one built from the card (the card's constant lore is then the client's to send). `clock`: with
    one, the lore's regex keys share one time budget (`domain/card/rules/lore.py`). `resident`: the card
    memory's resident summary, after the summary layers where it has room (`resident.py`). `memory_recall`:
    the card memory's passages for the user's words, in the last user message within half the recall
    share (and an eighth of the budget) — in a new story too, where nothing of its own is outside the window.
    `identity`: the character's identity anchor, at the head of the digest; `reanchor`: the re-anchoring block
    (`drift.py`), last before the user's words."""
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
    if reanchor is not None and ends_with_user:
        tails.append(reanchor)
    fixed = cache.count(system) + (cache.count(tail) if tail and ends_with_user else 0)
    key = WindowKey(budget - fixed, char, user, epoch)
    window = fit_window(Verbatim(leaf, iterator, summarized), key, cache, windows, recorded)
    if windows is not None and window.settled:
        windows.put(leaf.id, window)
    # (the boundary as it is now, not as the cached window saw it: an edit of its summary keeps the window)
    layers = (
        layers_from(load(window.boundary.id), load) if window.boundary is not None and load is not None else NO_LAYERS
    )

    def counted(of: Layers) -> list[CountedSummary]:
        return counted_summaries(of, load, char, user, texts, cache, prelude, identity) if load else []

    def summary_tokens(of: Layers) -> int:
        assert load is not None
        return layers_tokens(of, load, char, user, texts, epoch, cache, identity)

    in_chat: list[DepthBlock] = []
    if lore and ends_with_user:  # scanned on the newest messages, which any fitting of the window keeps
        how = LoreShown(lore_bodies, lore_lookup, cache.count_raw)
        spend = lore_budget(settings, budget, how, _filler(char, user), texts, constants=fixed_prompt is None)
        scanned = activated(lore, window.kept, settings, spend, char, user, clock)
        in_chat = depth_blocks(scanned, _filler(char, user), constants=fixed_prompt is None)
        found = lore_block(scanned, lore, texts, how, _filler(char, user))
        if found is not None:
            tails.insert(_before_instructions(tails), found)
    if memory_recall is not None and ends_with_user and settings.recall_k > 0 and settings.recall_tokens > 0:
        alone = window.cut_at is None and window.boundary is None  # nothing of the story's own to recall
        share = min(settings.recall_tokens if alone else settings.recall_tokens // 2, budget // 8)
        recalled = memory_block(
            memory_recall(leaf.text),
            fill_macros(resident.text, char, user) if resident else "",
            share,
            cache.count_line,
            texts,
            _filler(char, user),
        )
        if recalled is not None:
            tails.insert(_before_instructions(tails), recalled)
    scene_tokens = sum(cache.count_raw(block.text) for block in tails if block.what != "instructions")  # (+ reanchor)
    scene_tokens += sum(cache.count_raw(block.text) for block in in_chat)
    recalling = ends_with_user and recall is not None and settings.recall_k > 0 and settings.recall_room > 0
    share = settings.recall_room if recalling else 0
    fitted, unfolding = (window, layers), settings.fill_window and window.cut_at is None and load is not None
    resident_out: list[ExplainBlock] = []  # the resident summary left out, and why
    kept_for_resident = resident_tokens(resident, tails, char, user, texts, cache) if resident is not None else 0

    def filled(reserved: int) -> tuple[Window, Layers, list[CountedSummary], int]:
        """The window, its summary layers and their tokens (with the scene's) with `reserved` tokens
        left for recall: summarized turns shown word for word again while they fit (`fill_window`)."""
        turns, upper = fitted
        if unfolding:
            assert load is not None
            room = key.budget - scene_tokens - reserved - kept_for_resident  # room left: fill it word for word
            turns, upper = unfold_episodes(turns, upper, room, summary_tokens, load, cache, windows)
        counted_layers = counted(upper)
        room = key.budget - scene_tokens - _floor(turns)  # the words and the exchange before them come first
        if counted_layers and sum(summary.tokens for summary in counted_layers) > room:  # a small budget
            counted_layers = shortened(counted_layers, room, cache, texts)
        if resident is not None:
            counted_layers, out = with_resident(counted_layers, resident, tails, room, char, user, texts, cache)
            resident_out[:] = [out] if out is not None else []
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
        # what the window leaves unused (its next turn, or the next episode unfolded, does not fit) is recall's too
        spare = max(key.budget - extra - share - window.tokens, 0)
        room, share = share, share + spare
        shown = frozenset(str(node.id) for node, _ in layers.episodes)
        hits = recall(window.kept[0][NODE].depth, shown)
        if len(cache.recall_lines) > RECALL_LINES:
            cache.recall_lines.clear()  # (refilled by the passages that come back)
        today, dated = _days(leaf, load)
        most = settings.recall_k  # (recall finds some more: those the window takes back leave room for them)
        block = recall_block(
            hits, char, user, share, cache.count_line, fill_macros, texts, cache.recall_lines, dated, today, most
        )
        taken = _block_tokens(block, cache) if block is not None else 0
        if taken < share:  # the share the block left is the window's again: older turns word for word
            if unfolding:
                window, layers, summaries, extra = filled(taken)
            window = extend_window(window if unfolding else wide, [], key._replace(budget=key.budget - extra - taken))
            start, shown = window.kept[0][NODE].depth, frozenset(str(node.id) for node, _ in layers.episodes)
            kept = [h for h in hits if int(h.row["depth"]) < start and not (h.episode and h.row["node_id"] in shown)]
            # what the window could not take either (its next turn, or episode, does not fit) is the block's:
            # past recall_k, with the passages found besides
            left = max(key.budget - extra - taken - window.tokens, 0)
            if block is not None and (len(kept) < len(hits) or left):  # (some now in the window or its summaries)
                block = recall_block(
                    kept, char, user, taken + left, cache.count_line, fill_macros, texts, cache.recall_lines, dated,
                    today, most if not left else None,
                )  # fmt: skip
                share = taken + left  # (its share now: what it took, and what the window left)
                spare = max(share - room, 0)
        if block is not None:
            if spare and _block_tokens(block, cache) > share - spare:
                block = replace(
                    block, why=f"{block.why}; its share {share} tokens, {spare} of them unused by the window"
                )
            tails.insert(_before_instructions(tails), block)
            extra += _block_tokens(block, cache)
    assembly = Assembly(cache, budget)
    assembly.open(system, summaries, window.cut_at, layers.covered_depth, window.kept)
    assembly.explain += resident_out
    body = window.kept[:-1] if ends_with_user else window.kept  # the leaf's own words are added last, below
    assembly.add_path(body, leaf if ends_with_user else None)
    assembly.add_summaries(summaries)
    if ends_with_user:
        assembly.add_leaf(tails, window.kept[-1])  # the leaf's turn is always kept, and the leaf ends it
        assembly.add_in_chat(in_chat)
    if constants is not None and constants.refs:
        assembly.explain[0] = replace(assembly.explain[0], lore=constants.refs)
    return replace(
        assembly.context(leaf, fixed + extra + window.tokens, window.cut_at, layers, window.kept),
        language=texts.language,
    )


def _days(
    leaf: NodeView, load: Callable[[UUID], NodeView] | None
) -> tuple[str | None, Callable[[str], str | None] | None]:
    """This turn's day, and the day a recalled turn was said where it is another one (a story played over
    days, an imported chat with its dates; a story played in one day shows none)."""
    if load is None:
        return None, None
    today = leaf.created_at.date()

    def dated(node_id: str) -> str | None:
        day = load(UUID(node_id)).created_at.date()
        return day.isoformat() if day != today else None

    return today.isoformat(), dated


def _before_instructions(tails: list[TailBlock]) -> int:
    """Where a block goes among the tail blocks: before the card's post-history instructions and the
    re-anchoring block, which end the tail."""
    return next((i for i, b in enumerate(tails) if b.what in ("instructions", "reanchor")), len(tails))


def _block_tokens(block: TailBlock, cache: RenderCache) -> int:
    """A tail block's tokens: as it counted itself, else its text counted."""
    return block.tokens if block.tokens is not None else cache.count_raw(block.text)


def _system_prompt(card: CardData, user: str, texts: ContextTexts, constants: ConstantLore | None) -> str:
    if constants is None:
        return build_system_prompt(card, user, texts)
    return build_system_prompt(card, user, texts, constants.before, constants.after)


def _filler(char: str, user: str) -> Callable[[str], str]:
    return lambda text: fill_macros(text, char, user)


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
    identity: str = "",
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
    layers = layers_from(load(window.boundary.id), load) if window.boundary is not None else NO_LAYERS
    if window.cut_at is not None and window.cut_at.turn > layers.covered_turn:  # whole turns left out
        return True
    summaries = layers_tokens(layers, load, char, user, texts, epoch, cache, identity)
    return fixed + summaries + window.tokens + reserve > budget


def _floor(window: Window) -> int:
    """The tokens of the window's last exchange — the turn before the newest and the newest (the user's
    words) — or of what the window holds of them: kept word for word before any summary (a small budget
    shortens the summaries, never the reply being answered)."""
    kept = window.kept
    starts = [i for i, item in enumerate(kept) if item[NODE].kind in ("user", "greeting")]
    first = starts[-2] if len(starts) >= 2 else 0
    return sum(map(_TOKENS, kept[first:]))
