"""Engine overhead per turn, model time excluded, at 1k and 10k turns of history.

    python ops/bench/turn_overhead.py [--quick | --smoke] [--profile]

1. Builds two stories of 1k and 10k turns (--quick: 200 and 2k; --smoke: 20 and 40, 3 tool and 2 direct
   turns measured after 1 warm-up, recall by the offline hashing embedder, not e5) with branches directly with `Changji`
   (`_common.build_story`) in a temp data dir; their last turns hold the same texts.
2. Starts a `FakeModelServer` on loopback (in this process) that answers at once with a realistic
   two-round tool turn: the first call of a turn gets `draft_write(version 0, ~300 characters)`, the
   call after that write's tool result gets `draft_seal(version 1)`. A second, cheaper kind of turn
   is measured too: one round of streamed text (10 chunks) that the engine captures and seals.
3. Runs a `Service` in process with the fake server as its main model and drives turns the way the
   HTTP handler does: `TurnRunner.open(…)` (the user's words and an empty reply, and the context, in
   one command, which runs on the event loop when the writer thread is idle), then
   `TurnRunner.start(…)`, draining the turn's events until `done` as the JSON handler does (the last
   round's command folds the turn into the read models right after its save, before the turn's last
   events; the fake model answers too fast for any of it to be folded in the background meanwhile).
   The history keeps growing by the measured turns (from N to N + turns), as a real story would.

Model time is measured by a wrapper around the chat client (`TimedModel`, a `ChatModel` of its own
that times each `await inner.chat(...)`: request encoding, the loopback round trip, the fake server's
handler and the SSE parsing all count as model time). A second wrapper around the service
(`TimedHost`, the loop's `Runs` and `Folds`) times every write/load the loop makes, for the breakdown. Engine overhead
per turn = wall time from before `open_turn` to the `done` event − model time. Turns are interleaved
across the two stories (and both kinds) in a shuffled order after a few warm-up turns each.

Figures (the keys keep their names at every size; `FIGURES`, without --split): `overhead_median_ms_1k`,
`overhead_median_ms_10k`, `overhead_10k_vs_1k_ratio` (the two-round tool turn), with p90s, model and turn
medians, the breakdown per turn (`open`: the opening's command and the read after it less the context,
`context`: the context assembly, `rounds`: the play_round writes, `node`: reply loads (none on this
path), `rest`: loop and task scheduling; the read-model sync before the turn ends is shown with
`--split`), the same for the one-round direct-text turn (`direct_*`), and the chat request's size and
JSON encoding time (engine CPU inside model time).

`--profile`: cProfile around the measured turns on the event-loop thread and on the writer and
projector threads; the top functions go to stderr (the figures of a profiled run are slower).
`--split`: each write in two timed steps (the command, then the read-model sync, as `Executor.write`
does them), so the read-your-writes sync shows apart as `sync_median_ms_*`.
Progress goes to stderr; the figures are one JSON object on the last line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from _common import (
    CARD_SETTINGS,
    TENANT,
    Built,
    Texts,
    build_story,
    emit,
    figure_keys,
    log,
    median_ms,
    parse_args,
    percentile,
    sized,
    texts,
)
from _profile import Profiler

from api.bootstrap import Service, bootstrap
from api.settings import ModelSettings, Settings
from domain.application import Changji
from domain.ports import ChatModel, ChatResult
from engine.turn_types import DONE
from engine.turns import TurnRunner
from projections.context.records import Context
from projections.read_models.rows import job_time
from providers.fake_server import FakeModelServer, Step, Text, ToolCalls

FULL: dict[str, Any] = {
    "sizes": (1_000, 10_000),
    "tool_turns": 200,
    "direct_turns": 100,
    "warmup": 5,
    "embedder": "auto",
}
QUICK: dict[str, Any] = {"sizes": (200, 2_000), "tool_turns": 100, "direct_turns": 40, "warmup": 3, "embedder": "auto"}
SMOKE: dict[str, Any] = {"sizes": (20, 40), "tool_turns": 3, "direct_turns": 2, "warmup": 1, "embedder": "hashing"}
NAMES = ("1k", "10k")  # the keys keep these names at every size, as the convention asks
KINDS = ("tool", "direct")
DRAFT_CHARS = 300
TURN_TIMEOUT = 30.0
# the breakdown: figure name → what the loop called through the host (the rest: loop and task scheduling)
PARTS = {"open": "open_turn", "context": "context", "rounds": "_play_round", "node": "node", "sync": "sync"}
FIGURES = figure_keys(
    "{kind}overhead_median_ms_{n}", "{kind}overhead_p90_ms_{n}", "{kind}model_median_ms_{n}",
    "{kind}turn_median_ms_{n}", "{kind}{part}_median_ms_{n}", "{kind}prompt_kchars_{n}",
    "{kind}overhead_10k_vs_1k_ratio", "turns_measured", "request_kb", "request_encode_median_ms", "request_messages",
    "build_s", "history_turns_{n}", "overhead_budget_ms", "profiled", "split", "quick", "smoke", "context_window",
    "bench_s", kind=("", "direct_"), n=NAMES, part=(*(p for p in PARTS if p != "sync"), "rest"),
)  # fmt: skip


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", action="store_true", help="cProfile the measured turns (top functions to stderr)")
    parser.add_argument("--split", action="store_true", help="time each write's read-model sync apart (diagnostics)")
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        help="the card's context window in tokens (default: the service default)",
    )


# --- wrappers the turn loop is given (plain objects implementing its protocols) ---------------------


class TimedModel:
    """A `ChatModel` that times every call of the real client; the loop sees nothing else."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner, self.model = inner, inner.model
        self.seconds, self.calls = 0.0, 0
        self.last: tuple[Sequence[Mapping[str, Any]], int] = ((), 0)  # measured after the turn, off the clock

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
        max_tokens: int | None = None,
        on_call: Callable[[int, str, str], bool] | None = None,
    ) -> ChatResult:
        self.last = (messages, len(messages))  # the loop extends its list in place: keep the length
        t0 = time.perf_counter()
        try:
            return await self.inner.chat(messages, tools, on_text=on_text, max_tokens=max_tokens, on_call=on_call)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1

    async def close(self) -> None:
        await self.inner.close()


class TimedHost:
    """The turn loop's `Runs` and `Folds` over the service's executor and read side, adding up the time
    of each write/load by the function's name.

    `split=True` (diagnostics): a write runs as `Executor.write` does it, in two timed steps — the
    command on the writer thread (`executor.load`), then the read-model sync to its position — so the
    sync shows apart (part `sync`). The headline run uses `Executor.write` itself."""

    def __init__(self, service: Service, split: bool = False) -> None:
        self.service, self.app, self.split = service, service.app, split
        self.seconds: defaultdict[str, float] = defaultdict(float)

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.split:
            return await self._split_write(fn, *args)
        t0 = time.perf_counter()
        try:
            return await self.service.executor.write(fn, *args)
        finally:
            self.seconds[fn.__name__] += time.perf_counter() - t0

    async def _split_write(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        result = await self.service.executor.load(fn, *args)
        t1 = time.perf_counter()
        await self.service.read_side.sync(result if isinstance(result, int) else result.position)
        self.seconds[fn.__name__] += t1 - t0
        self.seconds["sync"] += time.perf_counter() - t1
        return result

    async def load(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await self.service.executor.load(fn, *args)
        finally:
            self.seconds[fn.__name__] += time.perf_counter() - t0

    async def command(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await self.service.executor.command(fn, *args)
        finally:
            self.seconds[fn.__name__] += time.perf_counter() - t0

    async def short_load(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await self.service.executor.short_load(fn, *args)
        finally:
            self.seconds[fn.__name__] += time.perf_counter() - t0

    async def sync(self, position: int | None = None) -> int:
        t0 = time.perf_counter()
        try:
            return await self.service.read_side.sync(position)
        finally:
            self.seconds["sync"] += time.perf_counter() - t0

    def sync_soon(self, position: int) -> None:
        self.service.read_side.sync_soon(position)  # returns at once: the catch-up runs while the model works

    def fold_now(self, position: int) -> int:
        t0 = time.perf_counter()  # inside the last round's command: shown apart as sync
        try:
            return self.service.read_side.fold_now(position)
        finally:
            self.seconds["fold_now"] += time.perf_counter() - t0

    def context(self, tenant_id: str, story_id: UUID, at: UUID | None) -> Context:
        t0 = time.perf_counter()  # inside the read after the opening's command
        try:
            return self.service.views.context(tenant_id, story_id, at)
        finally:
            self.seconds["context"] += time.perf_counter() - t0


# --- the fake model's answers ---------------------------------------------------------------------


def drafts(pool: Texts, count: int) -> list[str]:
    """`count` reply drafts of DRAFT_CHARS characters, stitched from the pool's replies."""
    out = []
    for i in range(count):
        text, k = "", 0
        while len(text) < DRAFT_CHARS:
            text += pool.replies[(7 * i + k) % len(pool.replies)]
            k += 1
        out.append(text[:DRAFT_CHARS])
    return out


@dataclass
class Script:
    """What the fake model answers for the turn being driven (turns run one at a time)."""

    kind: str = "tool"
    draft: str = ""

    def answer(self, body: Mapping[str, Any]) -> Step:
        if self.kind == "direct":
            size = len(self.draft) // 10 + 1
            return Text([self.draft[i : i + size] for i in range(0, len(self.draft), size)])
        messages = body.get("messages") or []
        if len(messages) >= 2 and messages[-1].get("role") == "tool":
            calls = messages[-2].get("tool_calls") or []
            if calls and calls[-1]["function"]["name"] == "draft_write":
                return ToolCalls(("draft_seal", {"version": 1}))
        return ToolCalls(("draft_write", {"version": 0, "content": self.draft}))


# --- one turn -------------------------------------------------------------------------------------


@dataclass
class Sample:
    wall: float
    model: float
    calls: int
    parts: dict[str, float]
    prompt_chars: int

    @property
    def overhead(self) -> float:
        return self.wall - self.model


@dataclass
class Bench:
    service: Service
    host: TimedHost
    model: TimedModel
    runner: TurnRunner
    script: Script
    samples: dict[tuple[str, str], list[Sample]] = field(default_factory=lambda: defaultdict(list))

    async def turn(self, story_id: UUID, kind: str, user_text: str, draft: str) -> Sample:
        self.script.kind, self.script.draft = kind, draft
        self.host.seconds.clear()
        self.model.seconds, self.model.calls = 0.0, 0
        t0 = time.perf_counter()
        opened = await self.runner.open(TENANT, story_id, user_text, None)  # as the HTTP handler does
        handle = self.runner.start(TENANT, story_id, opened.reply.id, opened=opened)
        ended = None
        async with asyncio.timeout(TURN_TIMEOUT):  # one deadline for the turn; the JSON handler drains the same way
            while (event := await handle.events.get()).kind != DONE:
                if event.kind in ("sealed", "stopped", "error", "ask", "revised"):
                    ended = event
        wall = time.perf_counter() - t0
        await handle.task
        if ended is None or ended.kind != "sealed" or ended.data["text"] != draft:
            raise SystemExit(f"the {kind} turn did not seal the scripted draft: {ended}")
        expected = 2 if kind == "tool" else 1
        if self.model.calls != expected:
            raise SystemExit(f"the {kind} turn made {self.model.calls} model calls, expected {expected}")
        messages, count = self.model.last
        prompt_chars = sum(len(m.get("content") or "") for m in list(messages)[:count])
        parts = dict(self.host.seconds)
        parts["open_turn"] = parts.get("open_turn", 0.0) + parts.get("_opened", 0.0) - parts.get("context", 0.0)
        folded = parts.pop("fold_now", 0.0)  # the read-model catch-up inside the last round's command
        parts["_play_round"] = parts.get("_play_round", 0.0) - folded
        parts["sync"] = parts.get("sync", 0.0) + folded
        return Sample(wall, self.model.seconds, self.model.calls, parts, prompt_chars)


# --- the run --------------------------------------------------------------------------------------


def build(data_dir: Path, sizes: Sequence[int], pool: Texts) -> dict[str, Built]:
    app = Changji(env=Settings(data_dir=data_dir).event_store_env())
    built = {}
    try:
        for name, turns in zip(NAMES, sizes, strict=True):
            log(f"building the {name} story ({turns} turns)…")
            built[name] = build_story(app, turns, pool, label=f"[{name}] ")
    finally:
        app.close()
    return built


async def settle_jobs(service: Service) -> None:
    while True:
        await service.read_side.sync()
        due = service.store.due_jobs(job_time(datetime.now(UTC)), 1)
        if not due and not service.jobs.running:
            return
        service.jobs.kick()
        await asyncio.sleep(0.2)


async def measure(
    data_dir: Path, built: dict[str, Built], plan: dict[str, Any], pool: Texts, profile: bool, split: bool
) -> tuple[Bench, list[dict[str, Any]]]:
    script = Script()
    async with FakeModelServer(fallback=script.answer) as fake:
        model = ModelSettings(base_url=fake.url, model="fake")
        settings = Settings(data_dir=data_dir, main_model=model, embedder=plan["embedder"])
        service = bootstrap(settings)
        t0 = time.perf_counter()
        await service.start()
        log(f"service up (read models caught up in {time.perf_counter() - t0:.1f}s); fake model at {fake.url}")
        t0 = time.perf_counter()
        await settle_jobs(service)  # the built stories' compaction backlog runs first, not during the measurement
        log(f"background jobs settled in {time.perf_counter() - t0:.1f}s")
        assert service.main_model is not None
        host, model = TimedHost(service, split), TimedModel(service.main_model)
        runner = TurnRunner(service.app, host, host, host.context, model, settings.max_rounds)
        bench = Bench(service, host, model, runner, script)
        texts_of = drafts(pool, 64)
        try:
            for i in range(plan["warmup"]):  # cold aggregate caches, render caches, connections
                for name in NAMES:
                    for kind in KINDS:
                        await bench.turn(built[name].story_id, kind, pool.pair(i)[0], texts_of[i % len(texts_of)])
            fake.requests.clear()
            gc.collect()
            jobs = [(kind, i) for kind in KINDS for i in range(plan[f"{kind}_turns"])]
            rng = random.Random(7)
            rng.shuffle(jobs)
            profiler = await Profiler.start(service) if profile else None
            started = time.perf_counter()
            order = list(NAMES)
            for n, (kind, i) in enumerate(jobs):
                user_text, draft = pool.pair(1000 + i)[0], texts_of[i % len(texts_of)]
                rng.shuffle(order)  # the same turn for both stories, in a random order
                for name in order:
                    bench.samples[(name, kind)].append(await bench.turn(built[name].story_id, kind, user_text, draft))
                if n % 50 == 49:
                    del fake.requests[:-20]  # the fake server keeps every body
                    log(f"  {n + 1}/{len(jobs)} turn pairs, {time.perf_counter() - started:.1f}s")
            if profiler is not None:
                await profiler.stop()
            bodies = fake.requests[-20:]
        finally:
            await service.close()
    return bench, bodies


def summarize(bench: Bench, figures: dict[str, Any], split: bool) -> None:
    for kind in KINDS:
        prefix = "" if kind == "tool" else "direct_"
        for name in NAMES:
            samples = bench.samples[(name, kind)]
            overhead = [s.overhead for s in samples]
            figures[f"{prefix}overhead_median_ms_{name}"] = median_ms(overhead)
            figures[f"{prefix}overhead_p90_ms_{name}"] = percentile(overhead, 90) * 1000
            figures[f"{prefix}model_median_ms_{name}"] = median_ms([s.model for s in samples])
            figures[f"{prefix}turn_median_ms_{name}"] = median_ms([s.wall for s in samples])
            parts = {
                part: [s.parts.get(fn, 0.0) for s in samples] for part, fn in PARTS.items() if fn != "sync" or split
            }
            parts["rest"] = [s.overhead - sum(s.parts.values()) for s in samples]
            for part, values in parts.items():
                figures[f"{prefix}{part}_median_ms_{name}"] = median_ms(values)
            figures[f"{prefix}prompt_kchars_{name}"] = statistics.median(s.prompt_chars for s in samples) / 1000
            log(f"  {kind:6} at {name:>3}: overhead median {median_ms(overhead):.2f} ms, "
                f"p90 {percentile(overhead, 90) * 1000:.2f} ms; model {median_ms([s.model for s in samples]):.2f} ms; "
                + ", ".join(f"{k} {median_ms(v):.2f}" for k, v in parts.items()) + f" ms ({len(samples)} turns)")  # fmt: skip
        figures[f"{prefix}overhead_10k_vs_1k_ratio"] = (
            figures[f"{prefix}overhead_median_ms_10k"] / figures[f"{prefix}overhead_median_ms_1k"]
        )
    figures["turns_measured"] = sum(len(v) for v in bench.samples.values())


def request_encoding(bodies: list[dict[str, Any]], figures: dict[str, Any]) -> None:
    """The chat request body as the client encodes it (aiohttp's default `json.dumps`): engine CPU that
    the model wrapper counts as model time, shown apart."""
    if not bodies:
        return
    times = []
    for body in bodies:
        t0 = time.perf_counter()
        encoded = json.dumps(body)
        times.append(time.perf_counter() - t0)
    figures["request_kb"] = len(encoded) / 1024
    figures["request_encode_median_ms"] = median_ms(times)
    figures["request_messages"] = len(bodies[-1]["messages"])
    log(f"  a chat request: {len(bodies[-1]['messages'])} messages, {len(encoded) / 1024:.0f} KB of JSON, "
        f"encoded in {median_ms(times):.2f} ms (counted as model time)")  # fmt: skip


def main() -> None:
    args = parse_args(__doc__, _extra)
    plan = sized(args, FULL, QUICK, SMOKE)
    if args.context_window:
        CARD_SETTINGS["context_window"] = args.context_window
    started = time.perf_counter()
    pool = texts()
    log(f"turn overhead bench ({sized(args, 'full', 'quick', 'smoke')}): histories of "
        f"{', '.join(map(str, plan['sizes']))} turns, {plan['tool_turns']} tool + {plan['direct_turns']} "
        f"direct turns each")  # fmt: skip
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="changji-bench-turns-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir(parents=True)
        built = build(data_dir, plan["sizes"], pool)
        figures["build_s"] = time.perf_counter() - started
        bench, bodies = asyncio.run(measure(data_dir, built, plan, pool, args.profile, args.split))
    summarize(bench, figures, args.split)
    request_encoding(bodies, figures)
    for name, turns in zip(NAMES, plan["sizes"], strict=True):
        figures[f"history_turns_{name}"] = turns
    figures["overhead_budget_ms"] = 5
    figures["profiled"] = bool(args.profile)
    figures["split"] = bool(args.split)
    figures["quick"] = bool(args.quick)
    figures["smoke"] = args.smoke
    figures["context_window"] = args.context_window or 0
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)


if __name__ == "__main__":
    main()
