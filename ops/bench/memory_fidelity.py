"""Memory fidelity end to end: when the user refers back to something, is it in what the model receives,
and at what token cost — against a window of recent turns of the same size, and full replay.

    python ops/bench/memory_fidelity.py [--quick | --smoke]

The service runs in this process behind a real HTTP server on loopback, with default settings, no side
model (compaction writes its offline summaries) and the default embedder. Each LoCoMo conversation (10;
--quick: 2; --smoke: the first, cut after 60 messages, with the questions whose evidence lies in them, and
the offline hashing embedder) is played through the HTTP API in bring-your-own mode — speaker A as the
user, B as the character, a run of one speaker's messages as one node — once per prompt budget (2k, 4k,
8k, 16k tokens: `context_window` = the budget, `reply_reserve` 0). Once the compaction jobs and the
recall index have caught up, each of the conversation's questions with evidence is posted as the user's
words on a branch of its own at the story's end, and once the work those turns announced is done too,
the context for each (`GET …/context?at=`) is checked:

- word for word: the share of evidence messages whose text is in the context verbatim (the window,
  a recalled passage or a quoted anchor);
- content words: the same, also counting an evidence message half of whose content words appear in
  a summary block;
- in the summaries: the share of evidence messages half of whose content words the digest and episode
  blocks hold, recall and the window aside (what the offline summarizer keeps of them).

The baseline is the latest messages that fit the same mean prompt tokens (the system prompt counted
as in the context); full replay holds every message. Figures per budget and category (-1 for a category
without questions); the headline keys `evidence_in_context_4k`, `recent_window_4k`, `evidence_in_context_8k`,
`mean_tokens_4k` (`FIGURES`: the keys of a run of every budget).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from _common import (
    LOCOMO_CATEGORIES,
    LocomoConversation,
    content_words,
    emit,
    figure_keys,
    locomo,
    log,
    parse_args,
    sized,
)
from aiohttp import web

from api.app import create_app
from api.bootstrap import bootstrap
from api.settings import Settings
from projections.context.window import MESSAGE_OVERHEAD_TOKENS
from providers.tokens import default_counter

BUDGETS = {"2k": 2_000, "4k": 4_000, "8k": 8_000, "16k": 16_000}
SUMMARY_BLOCKS = ("digest", "episode")
TENANT = "fidelity"
FULL: dict[str, Any] = {"conversations": None, "cut": None, "embedder": "auto"}
QUICK: dict[str, Any] = {"conversations": 2, "cut": None, "embedder": "auto"}
SMOKE: dict[str, Any] = {"conversations": 1, "cut": 60, "embedder": "hashing"}  # (e5 would spend it embedding)
FIGURES = figure_keys(
    "evidence_in_context_{b}", "content_words_in_context_{b}", "in_summaries_{b}", "recent_window_{b}", "mean_tokens_{b}",
    "vs_recent_window_{b}_ratio", "evidence_in_context_{b}_{category}", "recent_window_{b}_{category}",
    "full_replay_mean_tokens", "full_replay_evidence", "quick", "smoke", "bench_s",
    b=BUDGETS, category=LOCOMO_CATEGORIES.values(),
)  # fmt: skip


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str, key: str) -> None:
        self.session, self.base, self.headers = session, base, {"Authorization": f"Bearer {key}"}

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        async with self.session.request(method, self.base + path, json=body, headers=self.headers) as response:
            data = await response.json(content_type=None) if response.status != 204 else None
            if response.status >= 300:
                raise RuntimeError(f"{method} {path} → {response.status}: {data}")
            return data


def runs(conversation: LocomoConversation) -> list[tuple[bool, str, list[str]]]:
    """(is the user, text, dia ids) per node: a run of one speaker's messages is one node."""
    out: list[tuple[bool, str, list[str]]] = []
    for m in conversation.messages:
        is_user = m.speaker == conversation.speaker_a
        if out and out[-1][0] == is_user:
            out[-1][1] += "\n" + m.text  # type: ignore[operator]
            out[-1][2].append(m.dia_id)
        else:
            out.append([is_user, m.text, [m.dia_id]])  # type: ignore[arg-type]
    return [(bool(u), str(t), list(d)) for u, t, d in out]


async def play(client: Client, conversation: LocomoConversation, budget: int, extra: dict[str, Any]) -> tuple[str, str]:
    """A card and story for the conversation at this budget, played to its end; (story id, last reply id)."""
    nodes = runs(conversation)
    greeting = nodes.pop(0)[1] if nodes and not nodes[0][0] else "（见面）"
    card = await client.call(
        "POST", "/v1/cards",
        {
            "card": {"name": conversation.speaker_b, "first_mes": greeting},
            "settings": {"user_name": conversation.speaker_a, "context_window": budget, "reply_reserve": 0, **extra},
        },
    )  # fmt: skip
    story = await client.call("POST", "/v1/stories", {"card_id": card["id"]})
    last = story["root_id"]
    for is_user, text, _ in nodes:
        node = await client.call(
            "POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user" if is_user else "reply", "text": text}
        )
        last = node["node"]["id"]
    if nodes and nodes[-1][0]:  # it ended on the user's words: answer them, so questions branch from a reply
        node = await client.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": "……"})
        last = node["node"]["id"]
    return story["id"], last


async def settled(client: Client, story_ids: list[str]) -> None:
    """Wait until no compaction job has been due for a while (a job listed once its event is read, and a
    finished one may announce the next) and every recall index caught up with its archive."""
    deadline, quiet = time.perf_counter() + 1800, 0
    while time.perf_counter() < deadline and quiet < 3:
        due = 0
        for sid in story_ids:
            for status in ("pending", "running", "retrying"):
                jobs = await client.call("GET", f"/v1/jobs?story_id={sid}&kind=compact&status={status}&limit=1")
                due += len(jobs["items"])
        quiet = quiet + 1 if not due else 0
        await asyncio.sleep(0.5)
    for sid in story_ids:
        await client.call("GET", f"/v1/stories/{sid}/recall?q=index&k=1")  # waits for the story's index


def in_context(context: dict[str, Any], evidence: str) -> tuple[bool, bool]:
    """(word for word, by content words in a summary block)."""
    text = "\n".join(m["content"] for m in context["messages"])
    if evidence in text:
        return True, True
    words = content_words(evidence)
    summaries = " ".join(m["content"] for m in context["messages"][1:2])
    if not words or not any(b["what"] in SUMMARY_BLOCKS for b in context["explain"]):
        return False, False
    found = content_words(summaries)
    return False, len(words & found) >= len(words) / 2


def in_summaries(context: dict[str, Any], evidence: str) -> bool:
    """Whether half the evidence's content words are in the context's summary blocks (the digest and the
    episodes, as the offline summarizer writes them): what the summaries carry of it, recall aside."""
    words = content_words(evidence)
    blocks = [b for b in context["explain"] if b["what"] in SUMMARY_BLOCKS and b.get("span")]
    if not words or not blocks:
        return False
    text = " ".join(context["messages"][b["message_index"]]["content"][b["span"][0] : b["span"][1]] for b in blocks)
    return len(words & content_words(text)) >= len(words) / 2


def recent_window(nodes: list[tuple[bool, str, list[str]]], tokens: list[int], limit: int) -> set[str]:
    """The dia ids of the latest nodes that fit `limit` tokens."""
    kept: set[str] = set()
    used = 0
    for (_, _, dia_ids), count in zip(reversed(nodes), reversed(tokens), strict=True):
        if used + count > limit:
            break
        used += count
        kept.update(dia_ids)
    return kept


async def missed(
    client: Client, sid: str, question: Any, context: dict[str, Any], evidence: list[str], hits: list[bool]
) -> dict[str, Any]:
    """Why a question's evidence is not all in its context: each missing message's rank (from 0) in recall's
    top 50 for the question over the whole path (None: not among them), and what the recall block held."""
    at = context["leaf_id"]
    found = await client.call("GET", f"/v1/stories/{sid}/recall?q={quote(question.question[:500])}&k=50&at={at}")
    ranks = {}
    for text, hit in zip(evidence, hits, strict=True):
        if not hit:
            ranks[text[:80]] = next((i for i, h in enumerate(found["hits"]) if text[:60] in h["text"]), None)
    block = next((b for b in context["explain"] if b["what"] == "recall"), None)
    return {
        "category": LOCOMO_CATEGORIES[question.category],
        "question": question.question,
        "answer": question.answer,
        "missing_rank_of_50": ranks,
        "recall_block": None if block is None else {"tokens": block["tokens"], "why": block.get("why")},
        "tokens": context["tokens"],
    }


async def measure(
    client: Client,
    conversations: list[LocomoConversation],
    budgets: dict[str, int],
    extra: dict[str, Any],
    misses: Path | None = None,
) -> dict[str, float]:
    counter = default_counter()
    figures: dict[str, float] = {}
    texts = {m.dia_id + c.sample_id: m.text for c in conversations for m in c.messages}
    for name, budget in budgets.items():
        t0 = time.perf_counter()
        played = [await play(client, c, budget, extra) for c in conversations]
        log(f"[{name}] played {len(played)} conversations in {time.perf_counter() - t0:.0f}s; settling…")
        await settled(client, [sid for sid, _ in played])
        verbatim: defaultdict[int, list[float]] = defaultdict(list)
        by_words: defaultdict[int, list[float]] = defaultdict(list)
        summarized: list[float] = []
        baseline: defaultdict[int, list[float]] = defaultdict(list)
        prompt_tokens: list[int] = []
        pending: list[tuple[LocomoConversation, Any, dict[str, Any]]] = []
        asked = []
        for conversation, (sid, tip) in zip(conversations, played, strict=True):
            for question in conversation.questions:
                node = await client.call(
                    "POST", f"/v1/stories/{sid}/nodes", {"kind": "user", "text": question.question, "parent_id": tip}
                )
                asked.append((conversation, question, sid, node["node"]["id"]))
        await settled(client, [sid for sid, _ in played])  # (the compaction the questions' turns announced, done)
        for conversation, question, sid, node_id in asked:
            context = await client.call("GET", f"/v1/stories/{sid}/context?at={node_id}")
            prompt_tokens.append(context["tokens"])
            pending.append((conversation, question, context))
        mean_tokens = statistics.fmean(prompt_tokens)
        for conversation in conversations:
            nodes = runs(conversation)
            counts = [counter.count(text) + MESSAGE_OVERHEAD_TOKENS for _, text, _ in nodes]
            system = next(c for conv, _, c in pending if conv is conversation)["explain"][0]["tokens"]
            window = recent_window(nodes, counts, int(mean_tokens) - system)
            for conv, question, context in pending:
                if conv is not conversation:
                    continue
                evidence = [texts[e + conv.sample_id] for e in question.evidence]
                hits = [in_context(context, text) for text in evidence]
                if misses is not None and not all(w for w, _ in hits):
                    sid = played[conversations.index(conv)][0]
                    why = await missed(client, sid, question, context, evidence, [w for w, _ in hits])
                    with misses.open("a") as out:
                        out.write(json.dumps({"budget": name, **why}, ensure_ascii=False) + "\n")
                verbatim[question.category].append(sum(w for w, _ in hits) / len(hits))
                by_words[question.category].append(sum(c for _, c in hits) / len(hits))
                summarized.append(sum(in_summaries(context, text) for text in evidence) / len(evidence))
                baseline[question.category].append(sum(e in window for e in question.evidence) / len(question.evidence))
        every = [v for vs in verbatim.values() for v in vs]
        figures[f"evidence_in_context_{name}"] = statistics.fmean(every)
        figures[f"content_words_in_context_{name}"] = statistics.fmean(v for vs in by_words.values() for v in vs)
        figures[f"recent_window_{name}"] = statistics.fmean(v for vs in baseline.values() for v in vs)
        figures[f"in_summaries_{name}"] = statistics.fmean(summarized)
        figures[f"mean_tokens_{name}"] = mean_tokens
        figures[f"vs_recent_window_{name}_ratio"] = figures[f"evidence_in_context_{name}"] / max(
            figures[f"recent_window_{name}"], 1e-9
        )
        for category, label in LOCOMO_CATEGORIES.items():
            asked = bool(verbatim[category])
            figures[f"evidence_in_context_{name}_{label}"] = statistics.fmean(verbatim[category]) if asked else -1
            figures[f"recent_window_{name}_{label}"] = statistics.fmean(baseline[category]) if asked else -1
        log(
            f"[{name}] evidence word for word {figures[f'evidence_in_context_{name}']:.3f} "
            f"(content words {figures[f'content_words_in_context_{name}']:.3f}, in the summaries "
            f"{figures[f'in_summaries_{name}']:.3f}), recent window "
            f"{figures[f'recent_window_{name}']:.3f}, mean prompt {mean_tokens:.0f} tokens, {time.perf_counter() - t0:.0f}s"
        )
    full = [sum(counter.count(t) + MESSAGE_OVERHEAD_TOKENS for _, t, _ in runs(c)) for c in conversations]
    figures["full_replay_mean_tokens"] = statistics.fmean(full)
    figures["full_replay_evidence"] = 1.0
    return figures


async def run(
    plan: dict[str, Any],
    budgets: dict[str, int],
    extra: dict[str, Any],
    misses: Path | None = None,
    embeddings: Path | None = None,
) -> dict[str, float]:
    conversations = locomo(plan["conversations"], plan["cut"])
    if not conversations:
        raise SystemExit("LoCoMo is needed for this benchmark")
    with tempfile.TemporaryDirectory(prefix="changji-fidelity-") as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", port=0, embedder=plan["embedder"])
        kept = settings.data_dir / "embeddings.sqlite"
        if embeddings is not None and embeddings.exists():  # the passages' vectors of an earlier run
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(embeddings, kept)
        try:
            return await _served(settings, plan, conversations, budgets, extra, misses)
        finally:
            if embeddings is not None and kept.exists():
                shutil.copyfile(kept, embeddings)


async def _served(
    settings: Settings,
    plan: dict[str, Any],
    conversations: list[LocomoConversation],
    budgets: dict[str, int],
    extra: dict[str, Any],
    misses: Path | None,
) -> dict[str, float]:
    service = bootstrap(settings)
    _, key = service.keys.create_key(TENANT, "ops/bench/memory_fidelity.py")
    runner = web.AppRunner(create_app(settings, service), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    log(f"service on {base}, embedder {service.recall.embedder_name}")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
            return await measure(Client(session, base, key), conversations, budgets, extra, misses)
    finally:
        await runner.cleanup()


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budgets", default=",".join(BUDGETS), help="which budgets to measure (default: all)")
    parser.add_argument("--recall-k", type=int, default=None, help="recall_k for the cards (default: the service's)")
    parser.add_argument(
        "--recall-tokens", type=int, default=None, help="recall_tokens for the cards (default: the service's)"
    )
    parser.add_argument(
        "--recall-share", type=float, default=None, help="recall_share for the cards (default: the service's)"
    )
    parser.add_argument(
        "--embedder",
        default=None,
        choices=("auto", "e5", "hashing", "none"),
        help="the service's embedder (default: the size's; none = BM25 alone)",
    )
    parser.add_argument(
        "--misses", metavar="FILE", type=Path, help="write each question with evidence missing, and why"
    )
    parser.add_argument(
        "--embeddings",
        metavar="FILE",
        type=Path,
        help="the service's embeddings file, kept between runs (a run of another revision embeds nothing again)",
    )


def main() -> None:
    args = parse_args(__doc__, _extra)
    started = time.perf_counter()
    budgets = {name: BUDGETS[name] for name in args.budgets.split(",")}
    extra = {"recall_k": args.recall_k} if args.recall_k is not None else {}
    extra |= {"recall_tokens": args.recall_tokens} if args.recall_tokens is not None else {}
    extra |= {"recall_share": args.recall_share} if args.recall_share is not None else {}
    plan = dict(sized(args, FULL, QUICK, SMOKE))
    if args.embedder is not None:
        plan["embedder"] = args.embedder
    if args.misses is not None:
        args.misses.write_text("")  # (each miss is appended as it is found)
    figures = asyncio.run(run(plan, budgets, extra, args.misses, args.embeddings))
    figures.update({"quick": int(args.quick), "smoke": int(args.smoke), "bench_s": time.perf_counter() - started})
    emit(figures)


if __name__ == "__main__":
    main()
