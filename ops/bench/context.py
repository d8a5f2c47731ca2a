"""Next-turn context assembly vs story length, incremental vs naive replay, append and rebuild rates.

    python ops/bench/context.py [--quick | --smoke]

Builds three stories (1k, 10k, 100k turns; --quick: 400, 2k, 10k; --smoke: 20, 40, 80) on SQLite event stores in a temp
dir, each with branches (a regenerated reply every 50 turns, a 3-turn side branch every 500), by
calling `Changji.stories.append_node` directly; their last turns hold the same texts, so every size assembles
an equal window. Then, on the warm applications:

- assembly: the median time of the next-turn context (story → card → settings → `assemble_context`
  over `walk_up` from a freshly appended user node), samples interleaved across the three stories;
  `assembly_100k_vs_1k_ratio` = largest / smallest (the keys keep their names at every size);
- incremental vs naive at 10k (--quick: 2k): naive = read every event of the store from the
  notification log, fold all aggregates from scratch into a dict, build the whole path root→leaf
  and assemble from it with the same function and a fresh render cache; incremental =
  `assemble_context(card, settings, walk_up(app.node, leaf), render_cache)` on the warm application;
- cold start: a fresh `Changji` on the largest store assembling the context at its leaf;
- append rate: events/s of `Changji.stories.append_node` (2 events each: the node and the LeafMoved);
- rebuild rate: `ProjectionRunner.rebuild()` over the largest store's whole log / its wall time (the
  full-text index built beside the fold by a process of its own); then the read models alone, and the
  full-text index after them in this process.

Progress goes to stderr; the figures are one JSON object on the last line of stdout (`FIGURES`).
"""

from __future__ import annotations

import gc
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from _common import (
    TENANT,
    Built,
    Texts,
    build_story,
    emit,
    figure_keys,
    log,
    median_ms,
    parse_args,
    sized,
    sqlite_app,
    texts,
)

from domain.application import Changji
from domain.tree.rules.paths import walk_up
from projections.context.assemble import assemble_context
from projections.context.records import Context
from projections.context.window import RenderCache
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from providers.tokens import default_counter
from storage.notifications import SQLiteNotifications

COUNTER = default_counter()  # the tokenizer the service uses

FULL: dict[str, Any] = {
    "sizes": (1_000, 10_000, 100_000),
    "samples": 41,
    "naive_runs": 5,
    "incremental_runs": 101,
    "cold_runs": 3,
}
QUICK: dict[str, Any] = {
    "sizes": (400, 2_000, 10_000),
    "samples": 21,
    "naive_runs": 3,
    "incremental_runs": 51,
    "cold_runs": 3,
}
SMOKE: dict[str, Any] = {
    "sizes": (20, 40, 80),
    "samples": 3,
    "naive_runs": 1,
    "incremental_runs": 3,
    "cold_runs": 1,
}
NAMES = ("1k", "10k", "100k")  # the keys keep these names at every size, as the convention asks
FIGURES = figure_keys(
    "assembly_{n}_ms", "window_nodes_{n}", "turns_{n}", "assembly_100k_vs_1k_ratio",
    "incremental_10k_ms", "naive_10k_ms", "naive_10k_events", "incremental_vs_naive_10k_speedup",
    "cold_start_assembly_1k_ms", "cold_start_assembly_100k_ms",
    "append_events_per_s", "append_events_per_s_100k_first_10pct", "append_events_per_s_100k_last_10pct",
    "append_p50_ms", "rebuild_events", "rebuild_s", "rebuild_events_per_s", "rebuild_fold_events_per_s",
    "rebuild_search_after_s", "quick", "smoke", "bench_s", n=NAMES,
)  # fmt: skip
BATCH = 5_000


def next_context(app: Changji, renders: RenderCache, story_id: UUID, at: UUID) -> Context:
    """What the service does for GET /context?at=… (`service/views.py` `StoryViews.context`). The stories here
    are never compacted, so the service's read models say they have no summaries (`summarized=False`:
    a context cut by the budget does not walk on to the root looking for one)."""
    story = app.story(TENANT, story_id)
    leaf = app.story_node(story, at).id
    card = app.card_of(story)
    return assemble_context(card.data, app.settings(story), walk_up(app.node, leaf), renders, summarized=False)


def naive_context(app: Changji, story_id: UUID) -> tuple[Context, int]:
    """Full replay: every event from the notification log, all aggregates folded from scratch."""
    aggregates: dict[UUID, Any] = {}
    position, events = 0, 0
    while True:
        notifications = app.recorder.select_notifications(start=position + 1, limit=BATCH)
        if not notifications:
            break
        for notification in notifications:
            event: Any = app.mapper.to_domain_event(notification)
            aggregates[event.originator_id] = event.mutate(aggregates.get(event.originator_id))
        position = notifications[-1].id
        events += len(notifications)
    story = aggregates[story_id]
    card = aggregates[story.card_id]
    views = {key: agg.view for key, agg in aggregates.items() if hasattr(agg, "view")}
    path = []
    node: UUID | None = story.leaf_id
    while node is not None:
        path.append(views[node])
        node = views[node].parent_id
    path.reverse()  # the full path root→leaf
    settings = card.settings.merged(story.settings)
    context = assemble_context(card.data, settings, reversed(path), RenderCache(COUNTER))
    return context, events


def window_nodes(context: Context) -> int:
    return sum(len(b.node_ids) for b in context.explain if b.what in ("greeting", "verbatim", "user"))


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t0, result


def main() -> None:
    args = parse_args(__doc__)
    plan = sized(args, FULL, QUICK, SMOKE)
    sizes: tuple[int, ...] = plan["sizes"]
    started = time.perf_counter()
    pool: Texts = texts()
    log(f"context bench ({sized(args, 'full', 'quick', 'smoke')}): stories of {', '.join(map(str, sizes))} turns; "
        f"texts {len(pool.users)} pairs, mean {pool.mean_chars:.0f} chars")  # fmt: skip
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="changji-bench-context-") as tmp:
        apps: dict[str, Changji] = {}
        built: dict[str, Built] = {}
        renders: dict[str, RenderCache] = {}
        for name, turns in zip(NAMES, sizes, strict=True):
            apps[name] = sqlite_app(Path(tmp) / f"events-{name}.sqlite")
            log(f"building the {name} story ({turns} turns)…")
            built[name] = build_story(apps[name], turns, pool, label=f"[{name}] ")
            renders[name] = RenderCache(COUNTER)
            b = built[name]
            log(f"  {b.appends} appends ({b.regenerates} regenerates, {b.side_branches} side branches) in "
                f"{b.wall_seconds:.1f}s: {b.append_events_per_s:,.0f} events/s")  # fmt: skip

        # --- next-turn assembly, interleaved across the stories --------------------------------
        samples: dict[str, list[float]] = {name: [] for name in NAMES}
        contexts: dict[str, Context] = {}
        for name in NAMES:  # warm the render caches (the first assembly renders the whole window once)
            b = built[name]
            contexts[name] = next_context(apps[name], renders[name], b.story_id, b.tip_id)
        order = list(NAMES)
        for sample in range(plan["samples"]):
            random.shuffle(order)
            words = pool.pair(sample + 11)[0]  # the same words for every story
            for name in order:
                b, app = built[name], apps[name]
                user = app.stories.append_node(TENANT, b.story_id, uuid4(), "user", words, b.tip_id).node
                dt, contexts[name] = timed(next_context, app, renders[name], b.story_id, user.id)
                samples[name].append(dt)
        for name in NAMES:
            ctx = contexts[name]
            figures[f"assembly_{name}_ms"] = median_ms(samples[name])
            figures[f"window_nodes_{name}"] = window_nodes(ctx)
            log(f"  assembly at {name}: median {median_ms(samples[name]):.3f} ms, p90 "
                f"{sorted(samples[name])[int(0.9 * len(samples[name]))] * 1000:.3f} ms; "
                f"{window_nodes(ctx)} nodes, {ctx.tokens} tokens, {ctx.cut_turns} turns cut")  # fmt: skip
        figures["assembly_100k_vs_1k_ratio"] = figures["assembly_100k_ms"] / figures["assembly_1k_ms"]

        # --- incremental vs naive full replay at the middle story -------------------------------
        b, app = built["10k"], apps["10k"]
        story = app.story(TENANT, b.story_id)
        card, settings = app.card_of(story).data, app.settings(story)
        leaf = story.leaf_id
        assert leaf is not None
        incremental: list[float] = []
        for _ in range(plan["incremental_runs"]):
            dt, inc_ctx = timed(
                lambda: assemble_context(card, settings, walk_up(app.node, leaf), renders["10k"], summarized=False)
            )
            incremental.append(dt)
        naive: list[float] = []
        events = 0
        for _ in range(plan["naive_runs"]):
            gc.collect()
            dt, (naive_ctx, events) = timed(naive_context, app, b.story_id)
            naive.append(dt)
        if naive_ctx.messages != inc_ctx.messages:
            raise SystemExit("naive and incremental contexts differ: the benchmark compares different work")
        figures["incremental_10k_ms"] = median_ms(incremental)
        figures["naive_10k_ms"] = median_ms(naive)
        figures["naive_10k_events"] = events
        figures["incremental_vs_naive_10k_speedup"] = statistics.median(naive) / statistics.median(incremental)
        log(f"  10k: incremental {median_ms(incremental):.3f} ms, naive {median_ms(naive):.0f} ms over "
            f"{events} events → {figures['incremental_vs_naive_10k_speedup']:,.0f}×")  # fmt: skip

        # --- cold start on the largest store ---------------------------------------------------
        for name in ("1k", "100k"):
            b = built[name]
            cold: list[float] = []
            for _ in range(plan["cold_runs"]):
                t0 = time.perf_counter()
                fresh = sqlite_app(Path(tmp) / f"events-{name}.sqlite")
                leaf = fresh.story(TENANT, b.story_id).leaf_id
                assert leaf is not None
                next_context(fresh, RenderCache(COUNTER), b.story_id, leaf)
                cold.append(time.perf_counter() - t0)
                fresh.close()
            figures[f"cold_start_assembly_{name}_ms"] = median_ms(cold)
            log(f"  cold start at {name}: {median_ms(cold):.1f} ms (fresh Changji, story, card, window)")

        # --- append rate ------------------------------------------------------------------------
        total_appends = sum(b.appends for b in built.values())
        total_seconds = sum(b.append_seconds for b in built.values())
        big = built["100k"]
        figures["append_events_per_s"] = 2 * total_appends / total_seconds
        figures["append_events_per_s_100k_first_10pct"] = big.window_events_per_s(0.0, 0.1)
        figures["append_events_per_s_100k_last_10pct"] = big.window_events_per_s(0.9, 1.0)
        figures["append_p50_ms"] = median_ms(big.append_times)
        log(f"  append: {figures['append_events_per_s']:,.0f} events/s overall; largest story first 10% "
            f"{figures['append_events_per_s_100k_first_10pct']:,.0f}, last 10% "
            f"{figures['append_events_per_s_100k_last_10pct']:,.0f}")  # fmt: skip

        for name in ("1k", "10k"):
            apps.pop(name).close()
        gc.collect()

        # --- read-model rebuild over the largest log ----------------------------------------------
        app = apps["100k"]
        store = ReadModels(Path(tmp) / "read_models-100k.sqlite")
        runner = ProjectionRunner(app, store, SQLiteNotifications.of(app))  # as the service and the CLI read the log
        total = runner.max_position()
        log(f"rebuilding read models over {total:,} events…")
        done = [0]
        last_report = [time.perf_counter()]

        def progress(n: int) -> None:
            done[0] += n
            if time.perf_counter() - last_report[0] > 5:
                last_report[0] = time.perf_counter()
                log(f"  rebuilt {done[0]:,}/{total:,}")

        t0 = time.perf_counter()
        position = runner.rebuild(progress=progress)  # the full-text index built beside, by a process of its own
        rebuild_s = time.perf_counter() - t0
        assert position == total and runner.indexed_beside and not store.texts_to_index(), position
        log(f"  rebuild: {total:,} events in {rebuild_s:.1f}s = {total / rebuild_s:,.0f} events/s "
            f"(the full-text index beside it: {runner.indexed_beside:,} texts); again without the index…")  # fmt: skip
        done[0] = 0
        t0 = time.perf_counter()
        runner.rebuild(progress=progress, search=False)
        fold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        runner.index_search()
        search_s = time.perf_counter() - t0
        figures["rebuild_events"] = total
        figures["rebuild_s"] = rebuild_s
        figures["rebuild_events_per_s"] = total / rebuild_s  # the read models and the full-text index
        figures["rebuild_fold_events_per_s"] = total / fold_s  # the read models alone
        figures["rebuild_search_after_s"] = search_s  # the full-text index after the fold, in process
        log(f"  rebuild, read models alone: {fold_s:.1f}s = {total / fold_s:,.0f} events/s; the full-text index "
            f"after them, in process: {search_s:.1f}s")  # fmt: skip
        close = getattr(store, "close", None)
        close() if callable(close) else store.writer.conn.close()
        app.close()

        for name, turns in zip(NAMES, sizes, strict=True):
            figures[f"turns_{name}"] = turns
        figures["quick"] = bool(args.quick)
        figures["smoke"] = args.smoke
        figures["bench_s"] = time.perf_counter() - started
    emit(figures)


if __name__ == "__main__":
    main()
