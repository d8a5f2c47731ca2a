"""Drift signals on real chats nobody wrote to drift, and on the same chats with drift injected.

The chats: MemoryBank's (SiliconFriend's answers as the character; Chinese and English, 15 people each)
and LoCoMo's conversations (the second speaker as the character, the first as the user; each run of one
speaker's messages is one turn). Each chat becomes a path of nodes in memory and every reply is judged
as a context would judge it (`projections/context/drift.py`, the story defaults as thresholds):

- `false_<signal>_per_100`: how often each signal fires, per 100 replies of the real chats;
- `false_forced_per_100`: forced re-anchorings (two or more signals) per 100 replies (goal: under 1);
- `detect_<kind>_mean` / `_max`: replies from the first drifted one until its signal fires, over the
  chats with drift injected from their 25th turn (goal: within 5) — `creep` (each reply longer than the
  one before, cut or padded with the chat's own words: 1.4×, 1.8×, 2.2×… the early median, and at least
  0.4× of it more than the reply before), `repeat` (one
  phrase added to every reply), `language` (replies from the other language's chats), `forced` (creep
  and repeat together: the turns until a forced re-anchoring);
- `missed_<kind>`: injected chats where it never fired within 20 replies;
- `judge_ms_p50`: one turn's judgement as a context makes it (the previous turns remembered);
- `judge_cold_ms_1k` / `_10k` and their ratio: a judgement with nothing remembered, as the service makes
  it, at the leaf of stories of 1k and 10k turns in an SQLite store (the path's first depths from the
  story's lineage, built by one query of the read models, which recall shares); `judge_known_path_*`:
  the same with the lineage known (recall built it; goal: flat);
- `reanchor_tokens_per_100`: tokens the re-anchoring blocks cost per 100 turns on the real chats at the
  default period (15), with a derived anchor of SillyTavern's Seraphina card (cl100k tokens, 4 chars
  per token when tiktoken's data is not there).

    python ops/bench/drift.py [--quick | --smoke]

--quick: half the chats; --smoke: two chats of each source. Last line: the figures as JSON (`FIGURES`).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from _common import DATA_DIRS, TENANT, build_story, emit, figure_keys, locomo, log, parse_args, sized, sqlite_app, texts

from domain.card.anchor import derived_anchor
from domain.language import Language
from domain.tree.rules.drift import EARLY, SIGNALS
from domain.values import CardData, NodeView, StorySettings
from projections.context.drift import NO_DRIFT, DriftCache, drift_at, reanchor_block
from projections.read_models.store import ReadModels
from projections.runner import ProjectionRunner
from service.drift_reads import DriftReads
from service.lineages import Lineages

FULL: dict[str, Any] = {"share": 1.0, "cold": (1000, 10_000)}
QUICK: dict[str, Any] = {"share": 0.5, "cold": (1000, 10_000)}
SMOKE: dict[str, Any] = {"share": 0.0, "cold": (20, 100)}
KINDS = ("creep", "repeat", "language", "forced")
INJECT_AT = 25  # the first drifted turn
WATCH = 20  # replies watched for detection
PHRASES = {
    "zh": "她轻轻歪了歪头，眼里闪过一丝狡黠的光芒，嘴角微微上扬。",
    "en": "She tilts her head slightly, a mischievous glint flickering in her eyes as a small smile plays on her lips.",
}
FIGURES = figure_keys(
    "false_{signal}_per_100", "detect_{kind}_mean", "detect_{kind}_max", "missed_{kind}",
    signal=(*SIGNALS, "forced"), kind=KINDS,
) | {"replies", "chats", "judge_ms_p50", "reanchor_tokens_per_100"} | {
    "judge_cold_ms_1k", "judge_cold_ms_10k", "judge_cold_10k_vs_1k_ratio", "judge_known_path_ms_1k",
    "judge_known_path_ms_10k", "judge_known_path_10k_vs_1k_ratio",
}  # fmt: skip

Chat = tuple[Language, list[tuple[str, str]]]  # the language, (user's words, reply) per turn


def memory_bank(name: str, language: Language) -> list[Chat]:
    for folder in DATA_DIRS:
        path = folder / name
        if path.exists():
            data = json.loads(path.read_text("utf-8"))
            return [
                (language, [(t["query"], t["response"]) for day in p.get("history", {}).values() for t in day
                            if t.get("query") and t.get("response")])
                for p in data.values()
            ]  # fmt: skip
    log(f"MemoryBank's {name} not found")
    return []


def locomo_chats() -> list[Chat]:
    chats: list[Chat] = []
    for conversation in locomo():
        turns: list[tuple[str, str]] = []
        words: list[str] = []
        said: list[str] = []
        for message in conversation.messages:
            if message.speaker == conversation.speaker_a:
                if said:
                    turns.append(("\n".join(words), "\n".join(said)))
                    words, said = [], []
                words.append(message.text)
            else:
                said.append(message.text)
        if said:
            turns.append(("\n".join(words), "\n".join(said)))
        chats.append(("en", turns))
    return chats


def path_of(turns: Sequence[tuple[str, str]]) -> tuple[list[NodeView], Callable[[UUID], NodeView]]:
    """The chat as nodes in memory: a greeting, then the user's words and the reply of every turn."""
    story, now = uuid4(), datetime.now(UTC)
    nodes = [NodeView(uuid4(), story, None, "greeting", 0, 0, "…", False, False, 0, "final", 0, 0, now)]
    for turn, (words, reply) in enumerate(turns, start=1):
        for kind, text in (("user", words), ("reply", reply)):
            parent = nodes[-1]
            nodes.append(
                NodeView(
                    uuid4(), story, parent.id, kind, parent.depth + 1, turn, text, False, False, 0, "final", 0, 0, now
                )  # type: ignore[arg-type]
            )
    held = {n.id: n for n in nodes}
    return nodes, held.__getitem__


def judged(turns: Sequence[tuple[str, str]], language: Language, settings: StorySettings) -> list[Any]:
    nodes, load = path_of(turns)
    cache = DriftCache()
    return [drift_at(n, load, settings, language, cache) for n in nodes if n.kind == "reply"]


def injected(kind: str, chat: Chat, other: Sequence[str]) -> list[tuple[str, str]]:
    language, turns = chat
    out = list(turns[:INJECT_AT])
    early = statistics.median(len(r) for _, r in turns[:EARLY]) if turns[:EARLY] else 100
    filler = " ".join(r for _, r in turns)
    last = 0
    for k, (words, reply) in enumerate(turns[INJECT_AT:]):
        if kind in ("creep", "forced"):  # each reply longer than the one before, by 0.4× the early median at least
            target = last = max(int(early * (1.4 + 0.4 * k)), last + int(early * 0.4))
            start = (k * 997) % max(len(filler) - target, 1)
            reply = (reply + " " + filler[start : start + target])[:target]
        if kind in ("repeat", "forced"):
            reply = f"{reply} {PHRASES[language]}"
        if kind == "language":
            reply = other[k % len(other)]
        out.append((words, reply))
    return out


def detection(results: Sequence[Any], kind: str) -> int | None:
    for k, at in enumerate(results[INJECT_AT : INJECT_AT + WATCH]):
        if kind == "forced" and at.forced:
            return k + 1
        if any(s.name == kind and s.fired for s in at.signals):
            return k + 1
    return None


def main() -> None:
    args = parse_args(__doc__)
    plan = sized(args, FULL, QUICK, SMOKE)
    zh, en, lc = memory_bank("memory_bank_cn.json", "zh"), memory_bank("memory_bank_en.json", "en"), locomo_chats()
    sources = [zh, en, lc]
    chats = [c for source in sources for c in source[: max(2, round(len(source) * plan["share"]))]]
    settings = StorySettings()
    fires = dict.fromkeys((*SIGNALS, "forced"), 0)
    replies = 0
    periodic_turns = 0
    timings: list[float] = []
    for language, turns in chats:
        nodes, load = path_of(turns)
        cache = DriftCache()
        for node in nodes:
            if node.kind != "reply":
                continue
            started = time.perf_counter()
            at = drift_at(node, load, settings, language, cache)
            timings.append(time.perf_counter() - started)
            replies += 1
            for signal in at.signals:
                fires[signal.name] += signal.fired
            fires["forced"] += at.forced
        periodic_turns += len(turns) // settings.reanchor_turns
    figures: dict[str, Any] = {"replies": replies, "chats": len(chats)}
    for name, count in fires.items():
        figures[f"false_{name}_per_100"] = 100 * count / max(replies, 1)
    figures["judge_ms_p50"] = statistics.median(timings) * 1000 if timings else -1
    log(f"{len(chats)} chats, {replies} replies judged: " + ", ".join(f"{k} {v}" for k, v in fires.items()))

    others = {"zh": [r for _, t in en + lc for _, r in t][:200], "en": [r for _, t in zh for _, r in t][:200]}
    for kind in KINDS:
        found, missed = [], 0
        for language, turns in chats:
            if len(turns) < INJECT_AT + WATCH:
                continue
            results = judged(injected(kind, (language, turns), others[language]), language, settings)
            turn = detection(results, kind)
            if turn is None:
                missed += 1
            else:
                found.append(turn)
        figures[f"detect_{kind}_mean"] = statistics.mean(found) if found else -1
        figures[f"detect_{kind}_max"] = max(found) if found else -1
        figures[f"missed_{kind}"] = missed
        log(f"injected {kind}: detected after {found} replies; missed in {missed}")
    figures["reanchor_tokens_per_100"] = reanchor_cost(replies, periodic_turns, fires["forced"])
    figures.update(cold_judgements(plan["cold"]))
    emit(figures)


def cold_judgements(sizes: Sequence[int]) -> dict[str, float]:
    """A judgement with nothing remembered (a story's first context after a start), as the service makes it
    (`service/drift_reads.py`: the path's first depths from the story's lineage, which a cold story builds with
    one query of the read models, shared with recall), at the leaf of stories of `sizes` turns played into an
    SQLite event store and folded; and with the lineage known, nothing else remembered (`judge_known_path_*`)."""
    out: dict[str, float] = {}
    pool = texts()
    with tempfile.TemporaryDirectory() as folder:
        for size, name in zip(sizes, ("1k", "10k"), strict=True):
            app = sqlite_app(Path(folder) / f"events-{size}.sqlite")
            built = build_story(app, size, pool)
            store = ReadModels(Path(folder) / f"read-{size}.sqlite")
            ProjectionRunner(app, store).catch_up()
            story = app.story(TENANT, built.story_id)
            card, settings = app.card_of(story), app.settings(story)
            assert story.leaf_id is not None
            leaf = app.node(story.leaf_id)
            cold, known = [], []
            for _ in range(20):
                lineages = Lineages(ancestry=store.ancestry)  # (nothing remembered)
                for timings in (cold, known):  # then again, the story's lineage known (recall had built it)
                    reads = DriftReads(app, partial(lineages.at, load=app.node))
                    started = time.perf_counter()
                    reads.at(card, settings, story.id, leaf)
                    timings.append(time.perf_counter() - started)
            out[f"judge_cold_ms_{name}"] = statistics.median(cold) * 1000
            out[f"judge_known_path_ms_{name}"] = statistics.median(known) * 1000
    out["judge_cold_10k_vs_1k_ratio"] = out["judge_cold_ms_10k"] / max(out["judge_cold_ms_1k"], 1e-9)
    out["judge_known_path_10k_vs_1k_ratio"] = out["judge_known_path_ms_10k"] / max(out["judge_known_path_ms_1k"], 1e-9)
    log(", ".join(f"{k} {v:.3f}" for k, v in out.items()))
    return out


def reanchor_cost(replies: int, periodic: int, forced: int) -> float:
    """Tokens per 100 turns of the re-anchoring blocks: periodic ones and the forced ones measured."""
    card = seraphina()
    block = reanchor_block(derived_anchor(card), card.name, "User", card.language(), 15, 15, NO_DRIFT, lambda t: t)
    tokens = count_tokens(block.text) if block is not None else 0
    log(f"a re-anchoring block of {card.name}: {tokens} tokens")
    return 100 * (periodic + forced) * tokens / max(replies, 1)


def seraphina() -> CardData:
    for root in (Path(__file__).resolve().parents[3] / "shared" / "data" / "cards", Path("/work/shared/data/cards")):
        for path in sorted(root.glob("*.json")) if root.exists() else ():
            data = json.loads(path.read_text("utf-8"))
            fields = data.get("data", data)
            if "Seraphina" in str(fields.get("name", "")):
                keep = {k: v for k, v in fields.items() if k in CardData.model_fields}
                return CardData.model_validate(keep)
    return CardData(name="Seraphina", description="A guardian of the forest glade, gentle and protective.")


def count_tokens(text: str) -> int:
    try:
        import tiktoken

        return len(tiktoken.get_encoding("cl100k_base").encode(text))
    except Exception:
        return max(len(text) // 4, 1)


if __name__ == "__main__":
    main()
