"""Lore activation per context: its cost against the size of a card's lorebooks, and a context's with and
without them.

    python ops/bench/lore.py [--quick | --smoke]

Books of 0, 100, 1,000 and 5,000 entries (--quick: up to 1,000; --smoke: all four, 2 samples over a
30-turn story), each entry two or three keys drawn from the MemoryBank turn texts' words (Chinese and
English), one in twenty a regular expression, one in fifty constant, selective logic mixed; scanned against
the newest four messages of a story (the default scan depth), as a context at a fresh user node does.
Figures:

- `activate_<n>_ms`: median time of `domain.card.rules.lore.activate` over the book (200 samples);
- `context_<n>_ms`: median time of the whole context (`assemble_context`, BYO mode: hits in full) on a
  2,000-turn story with that book, samples interleaved; `context_lore_vs_none_ratio` at the largest book;
- `hits_<n>`: keyword hits kept in the last sample (at most the books' max_hits).

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
from domain.card.rules.lore import activate
from domain.tree.rules.paths import walk_up
from projections.context.assemble import assemble_context
from projections.context.window import RenderCache, WindowCache
from providers.tokens import default_counter

LOGICS = ("and_any", "not_all", "not_any", "and_all")
FULL: dict[str, Any] = {"sizes": (0, 100, 1000, 5000), "samples": 200, "story_turns": 2000}
QUICK: dict[str, Any] = {"sizes": (0, 100, 1000), "samples": 200, "story_turns": 2000}
SMOKE: dict[str, Any] = {"sizes": (0, 100, 1000, 5000), "samples": 2, "story_turns": 30}
FIGURES = figure_keys(
    "activate_{n}_ms", "context_{n}_ms", "hits_{n}", "context_lore_vs_none_ratio", "smoke", n=FULL["sizes"]
)


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
                order=rng.randrange(200),
            )
        )  # fmt: skip
    return LoreBookView("bench", LoreScan(), entries)


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
        timings: dict[int, list[float]] = {size: [] for size in sizes}
        contexts: dict[int, list[float]] = {size: [] for size in sizes}
        hits: dict[int, int] = {}
        for _ in range(plan["samples"]):
            for size, view in books.items():
                started = time.perf_counter()
                found = activate([view] if size else [], messages, char=card.name, user=settings.user_name)
                timings[size].append(time.perf_counter() - started)
                hits[size] = len(found.hits)
                started = time.perf_counter()
                assemble_context(
                    card, settings, walk_up(app.node, leaf.id), renders, windows, load=app.node,
                    lore=[view] if size else (), lore_bodies=True,
                )  # fmt: skip
                contexts[size].append(time.perf_counter() - started)
        app.close()
    for size in sizes:
        figures[f"activate_{size}_ms"] = median_ms(timings[size])
        figures[f"context_{size}_ms"] = median_ms(contexts[size])
        figures[f"hits_{size}"] = hits[size]
        log(
            f"{size:>5} entries: activate {figures[f'activate_{size}_ms']:.3f} ms, context {figures[f'context_{size}_ms']:.3f} ms"
        )
    figures["context_lore_vs_none_ratio"] = figures[f"context_{sizes[-1]}_ms"] / figures["context_0_ms"]
    figures["smoke"] = args.smoke
    emit(figures)


if __name__ == "__main__":
    main()
