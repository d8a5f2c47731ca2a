"""Lore activation per context: its cost against the size of a card's lorebooks, and a context's with and
without them.

    python ops/bench/lore.py [--quick | --smoke]

Books of 0, 100, 1,000 and 5,000 entries (--quick: up to 1,000; --smoke: all four, 2 samples over a
30-turn story), each entry two or three keys drawn from the MemoryBank turn texts' words (Chinese and
English), one in twenty a regular expression, one in fifty constant, selective logic mixed, and World Info's
rules at work: one entry in ten with a probability of 50, one in eight in one of twenty inclusion groups,
one in thirty `preventRecursion` (the book not recursive, as a World Info file is imported); scanned against
the newest four messages of a story (the default scan depth) under the default lore budget (25 % of a
28,672-token budget, entries counted as the context shows them in full), each sample at a node of its own
(fresh draws), as a context at a fresh user node does. Figures:

- `activate_<n>_ms`: median time of `domain.card.rules.lore.activate` over the book (200 samples; goal at
  1,000 entries: 10 ms); `activate_1000_recursive_ms`: the same book recursive (3 steps), where each hit's
  content is scanned again;
- `context_<n>_ms`: median time of the whole context (`assemble_context`, BYO mode: hits in full) on a
  2,000-turn story with that book, samples interleaved; `context_lore_vs_none_ratio` at the largest book;
- `hits_<n>`, `left_out_<n>`: keyword hits kept, and left out (budget, probability, groups), in the last
  sample;
- `context_1000_short_ms`, `flat_ratio`: the context with the 1,000-entry book on a story a tenth as long,
  and the long story's over it (flat in story length: not above 1; the short story's whole path is in its
  window, which the lore block's room makes it fit again).

Progress goes to stderr; the figures are one JSON object on the last line of stdout (`FIGURES`).
"""

from __future__ import annotations

import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from _common import TENANT, build_story, emit, figure_keys, log, median_ms, parse_args, sized, sqlite_app, texts

from domain.card.lore import LoreBookView, LoreEntry, LoreScan
from domain.card.rules.lore import LoreTurn, activate
from domain.texts import CONTEXT_TEXTS
from domain.tree.rules.paths import walk_up
from projections.context.assemble import assemble_context
from projections.context.lore import LoreShown, lore_budget
from projections.context.window import RenderCache, WindowCache
from providers.tokens import default_counter

LOGICS = ("and_any", "not_all", "not_any", "and_all")
TEXTS = CONTEXT_TEXTS["en"]
FULL: dict[str, Any] = {"sizes": (0, 100, 1000, 5000), "samples": 200, "story_turns": 2000}
QUICK: dict[str, Any] = {"sizes": (0, 100, 1000), "samples": 200, "story_turns": 2000}
SMOKE: dict[str, Any] = {"sizes": (0, 100, 1000, 5000), "samples": 2, "story_turns": 30}
FIGURES = figure_keys(
    "activate_{n}_ms", "context_{n}_ms", "hits_{n}", "left_out_{n}", "context_lore_vs_none_ratio",
    "context_1000_short_ms", "flat_ratio", "activate_1000_recursive_ms", "smoke", n=FULL["sizes"],
)  # fmt: skip


def book(size: int, words: list[str], rng: random.Random) -> LoreBookView:
    entries = []
    for uid in range(size):
        keys = rng.sample(words, 3 if uid % 3 else 2)
        if uid % 20 == 0:
            keys[0] = f"/{re.escape(keys[0])}\\w*/i"
        entries.append(
            LoreEntry(
                uid=uid, keys=tuple(keys[:2]), secondary_keys=tuple(keys[2:]), title=f"entry {uid}",
                content=" ".join(rng.sample(words, 12)), constant=uid % 50 == 49, logic=LOGICS[uid % 4],
                order=rng.randrange(200), extensions=world_info(uid),
            )
        )  # fmt: skip
    return LoreBookView("bench", LoreScan(), entries)


def world_info(uid: int) -> dict[str, Any]:
    """World Info's fields on some entries: a probability, an inclusion group, no recursion from it."""
    extensions: dict[str, Any] = {}
    if uid % 10 == 3:
        extensions["probability"] = 50
    if uid % 8 == 5:
        extensions["group"] = f"group {uid % 20}"
    if uid % 30 == 7:
        extensions["preventRecursion"] = True
    return extensions


def main() -> None:
    args = parse_args(__doc__)
    plan = sized(args, FULL, QUICK, SMOKE)
    sizes = plan["sizes"]
    pool = texts()
    rng = random.Random(7)
    sample = " ".join(pool.users[:2000] + pool.replies[:2000])
    words = sorted(set(re.findall(r"[A-Za-z]{4,}|[\u4e00-\u9fff]{2}", sample)))
    log(f"{len(words)} distinct words for keys")
    books = {size: book(size, words, rng) for size in sizes}
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        app = sqlite_app(Path(tmp) / "events.sqlite")
        built = build_story(app, plan["story_turns"], pool)
        leaf = app.stories.append_node(TENANT, built.story_id, uuid4(), "user", pool.users[5]).node
        path = list(walk_up(app.node, leaf.id))
        messages = [f"x: {node.text}" for node in reversed(path[:4])]
        story = app.story(TENANT, built.story_id)
        card, settings = app.card_of(story).data, app.settings(story)
        renders, windows = RenderCache(default_counter()), WindowCache()
        short = build_story(app, max(plan["story_turns"] // 10, 3), pool)
        short_leaf = app.stories.append_node(TENANT, short.story_id, uuid4(), "user", pool.users[5]).node
        timings: dict[int, list[float]] = {size: [] for size in sizes}
        contexts: dict[int, list[float]] = {size: [] for size in sizes}
        shorter: list[float] = []
        recursive: list[float] = []
        hits: dict[int, tuple[int, int]] = {}
        count = renders.count_raw
        shown = LoreShown(True, False, count)
        budget = lore_budget(settings, settings.context_window - settings.reply_reserve, shown, str, TEXTS, True)
        for sample in range(plan["samples"]):
            for size, view in books.items():
                turn = LoreTurn(seed=f"node {sample}", messages=plan["story_turns"] * 2)
                started = time.perf_counter()
                found = activate(
                    [view] if size else [], messages, char=card.name, user=settings.user_name, budget=budget,
                    turn=turn,
                )  # fmt: skip
                timings[size].append(time.perf_counter() - started)
                hits[size] = (len(found.hits), len(found.left_out))
                started = time.perf_counter()
                assemble_context(
                    card, settings, walk_up(app.node, leaf.id), renders, windows, load=app.node,
                    lore=[view] if size else (), lore_bodies=True,
                )  # fmt: skip
                contexts[size].append(time.perf_counter() - started)
                if size == 1000:
                    deep = LoreBookView(view.book_id, LoreScan(recursive=True), view.entries)
                    started = time.perf_counter()
                    activate([deep], messages, char=card.name, user=settings.user_name, budget=budget, turn=turn)
                    recursive.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    assemble_context(
                        card, settings, walk_up(app.node, short_leaf.id), renders, windows, load=app.node,
                        lore=[view], lore_bodies=True,
                    )  # fmt: skip
                    shorter.append(time.perf_counter() - started)
        app.close()
    for size in sizes:
        figures[f"activate_{size}_ms"] = median_ms(timings[size])
        figures[f"context_{size}_ms"] = median_ms(contexts[size])
        figures[f"hits_{size}"], figures[f"left_out_{size}"] = hits[size]
        log(
            f"{size:>5} entries: activate {figures[f'activate_{size}_ms']:.3f} ms, context {figures[f'context_{size}_ms']:.3f} ms"
        )
    figures["context_lore_vs_none_ratio"] = figures[f"context_{sizes[-1]}_ms"] / figures["context_0_ms"]
    figures["context_1000_short_ms"] = median_ms(shorter)
    figures["activate_1000_recursive_ms"] = median_ms(recursive)
    figures["flat_ratio"] = figures["context_1000_ms"] / figures["context_1000_short_ms"]
    figures["smoke"] = args.smoke
    emit(figures)


if __name__ == "__main__":
    main()
