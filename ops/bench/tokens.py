"""Prompt tokens, summary/verbatim overlap and fact presence over a long story, under four context policies.

    python ops/bench/tokens.py [--quick | --smoke]

The story (2,000 turns; --quick: 300; --smoke: 50, one compaction) is built at run time from LoCoMo
(`shared/data/locomo/locomo10.json`, CC BY-NC 4.0, Maharana et al., ACL 2024; used as benchmark data only,
nothing is copied into the repo):
the ten conversations are concatenated in file order, each conversation's sessions in numeric order;
`speaker_a` speaks as the user and `speaker_b` as the character, consecutive messages of one role are
merged into one message (joined by a newline, also across session and conversation boundaries), and a
turn is one user message plus the reply after it. Only the `text` of a message is used (image captions
are left out). LoCoMo gives about 2,870 such turns, enough for the full run; were it to give fewer, the
story would go on with MemoryBank (SiliconFriend) chats from `_common.texts()`, which carry no facts.

Planted facts: the evidence `dia_id`s of LoCoMo's QA items (normalised: "D30:05" is D30:5, "D8:6; D9:17"
is two ids; ids that name no message are skipped), one fact per distinct evidence message inside the
built story. A request sees the facts said before it (everything up to and including the user message it
answers). A fact is **present** in a request when the evidence message's text appears verbatim in one of
its messages, or when the summary in it represents the fact by this proxy: the summary contains at least
half of the evidence text's content words (lowercased ASCII alphanumeric words of 4+ characters, and
bigrams of consecutive CJK characters). A fact without content words counts only verbatim.

Every request is the context for the reply to one user message. Prompt tokens are counted the same way
for all policies: the sum over the request's messages of the project tokenizer's count
(`providers.tokens.default_counter()`) plus `MESSAGE_OVERHEAD_TOKENS` per message. All policies share
the same system prompt (built from one small card by `build_system_prompt`). Policies:

- `full`: the system prompt and every earlier message verbatim, no budget.
- `sillytavern`: SillyTavern's Summarize extension with its defaults: every 10 messages the summary is
  regenerated over ALL history so far (the offline extractive summarizer, `summarize_episode`, with
  ST's 200-word limit taken as 1,200 characters), sent as a system message `[Summary: …]` right after
  the system prompt; then history is filled message by message, newest first, while it fits the budget
  context_window − reply_reserve (32768 − 4096, Changji's defaults), stopping at the first message that
  does not fit. Summary and verbatim history overlap.
- `liyuan`: Liyuan's compaction: after a reply, when the live (unsummarized) turns reach 6 + 30 and the
  covered text has at least 2,000 characters, everything but the last 6 turns is folded into ONE rolling
  summary that carries the previous one (the covered turns are extracted with `summarize_episode`, as
  Changji does for a pack, then folded with `fold_digest` into the previous summary: a digest with no
  episode layer); the request is the summary (one user message, opened by 【前情提要】) plus the live turns.
- `changji`: the real engine on an in-memory event store, default story settings (keep 6, pack 30,
  episodes_kept 3, min_pack_chars 2000, window 32768, reply reserve 4096): every turn is appended with
  `Changji.stories.append_node`; when a reply announces a compaction it is run at once with
  `CompactWorker(...).compact` and the offline extractive summarizer (no side model), then the job is
  finished; each request is `assemble_context` at the user node (render and window caches, as served).

Figures (the last line of stdout, one JSON object), for each policy p:

- `<p>_mean_prompt_tokens`, `<p>_max_prompt_tokens`: prompt tokens per request over all requests;
- `<p>_overlap_tokens`: summed over all requests, the tokens of verbatim messages whose turns are also
  covered by a summary in the same request (`sillytavern`: messages inside the range the current summary
  was made from; `changji`: verbatim nodes whose depth lies in a digest's or an episode's `covers` range
  in the explain list; `full` and `liyuan` have none by construction);
- `<p>_fact_presence`: the fraction of facts present in the request for the story's final turn (0–1);

plus `turns` (turns in the story), `facts` (facts said before the final request) and `smoke` (`FIGURES`
lists them all). Progress, the
fact presence averaged over checkpoints every 100 turns, and a check of the token convention against
Changji's own count (`Context.tokens`) go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

from _common import REPO, content_words, emit, figure_keys, log, parse_args, sized, texts

from domain.application import Changji
from domain.texts import CONTEXT_TEXTS
from domain.tree.rules.extractive import Line, fold_digest, summarize_episode
from domain.tree.rules.paths import walk_up
from domain.values import DIGEST_SECTIONS, CardData, StorySettings
from projections.context.assemble import assemble_context
from projections.context.system_prompt import build_system_prompt
from projections.context.window import MESSAGE_OVERHEAD_TOKENS, RenderCache, WindowCache
from providers.tokens import default_counter
from schedulers.outcomes import Failed
from schedulers.workers.compaction import LATEST_TURNS, CompactWorker, Inline

LOCOMO_PATHS = (
    Path(os.environ.get("CHANGJI_SHARED", REPO.parent / "shared")) / "data" / "locomo" / "locomo10.json",
    Path("/work/shared/data/locomo/locomo10.json"),
)
TENANT = "bench"
CHAR, USER = "Companion", "User"
CARD = CardData(
    name=CHAR,
    description="{{char}} and {{user}} are two friends who have been chatting about their lives for months.",
    personality="warm, curious, remembers what {{user}} tells them",
)
SETTINGS = StorySettings(user_name=USER)  # Changji's defaults otherwise
LANGUAGE = CARD.language(SETTINGS.language)  # (English: LoCoMo's)
TEXTS = CONTEXT_TEXTS[LANGUAGE]
OPENER = TEXTS.summary_opener  # what changji's summaries open with
BUDGET = SETTINGS.context_window - SETTINGS.reply_reserve
ST_EVERY_MESSAGES = 10  # Summarize: "update every N messages"
ST_SUMMARY_CHARS = 1200  # Summarize: "limit the summary to 200 words", at about 6 characters a word
LIYUAN_KEEP, LIYUAN_PERIOD, LIYUAN_MIN_CHARS = 6, 30, 2000
CHECKPOINT_EVERY = 100
POLICIES = ("full", "sillytavern", "liyuan", "changji")
FIGURES = figure_keys(
    "{p}_mean_prompt_tokens", "{p}_max_prompt_tokens", "{p}_overlap_tokens", "{p}_fact_presence", "turns", "facts",
    "smoke", p=POLICIES,
)  # fmt: skip

_DIA = re.compile(r"D:?(\d+):(\d+)")


# --- the story and its facts --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fact:
    text: str  # the evidence message, as LoCoMo has it
    index: int  # the position of the (merged) message holding it: turn t's user is 2(t−1), its reply 2t−1
    words: frozenset[str]

    def present(self, verbatim: str, summary: frozenset[str]) -> bool:
        if self.text in verbatim:
            return True
        return bool(self.words) and 2 * len(self.words & summary) >= len(self.words)


@dataclass
class Story:
    messages: list[str]  # user, reply, user, reply, … (turn t is messages 2t−2 and 2t−1)
    facts: list[Fact]
    sources: dict[str, int] = field(default_factory=dict)  # turns taken from each data set

    @property
    def turns(self) -> int:
        return len(self.messages) // 2

    def lines(self, start: int, stop: int) -> list[Line]:
        """Messages [start, stop) as summarizer lines (speaker, text, turn)."""
        return [Line(USER if i % 2 == 0 else CHAR, self.messages[i], i // 2 + 1) for i in range(start, stop)]


def _locomo() -> list[dict[str, Any]]:
    for path in LOCOMO_PATHS:
        if path.exists():
            data: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))
            return data
    log("LoCoMo not found: the story is MemoryBank only and has no facts")
    return []


def build(turns: int) -> Story:
    """The first `turns` turns of the LoCoMo stream (then MemoryBank), and the facts inside them."""
    stream: list[tuple[bool, list[str], list[tuple[str, str]]]] = []  # (is user, texts, (sample, dia_id) keys)
    qa: list[tuple[str, str]] = []  # (sample, raw evidence id)
    for sample in _locomo():
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k in conversation if re.fullmatch(r"session_\d+", k) and isinstance(conversation[k], list)),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            for message in conversation[key]:
                is_user = message["speaker"] == conversation["speaker_a"]
                ref = (sample["sample_id"], _normal(message["dia_id"]))
                if stream and stream[-1][0] == is_user:
                    stream[-1][1].append(message["text"])
                    stream[-1][2].append(ref)
                else:
                    stream.append((is_user, [message["text"]], [ref]))
        qa += [(sample["sample_id"], str(e)) for item in sample["qa"] for e in item.get("evidence", [])]
    if stream and not stream[0][0]:
        log("the first LoCoMo message is the character's: left out")
        stream.pop(0)
    pairs = min(len(stream) // 2, turns)
    messages = ["\n".join(entry[1]) for entry in stream[: 2 * pairs]]
    where: dict[tuple[str, str], tuple[int, str]] = {}
    for index, (_, parts, refs) in enumerate(stream[: 2 * pairs]):
        for text, ref in zip(parts, refs, strict=True):
            where[ref] = (index, text)
    story = Story(messages, [], {"locomo": pairs})
    if pairs < turns:
        pool = texts()
        for i in range(turns - pairs):
            story.messages += pool.pair(i)
        story.sources["memorybank"] = turns - pairs
    seen: set[tuple[str, str]] = set()
    for sample_id, raw in qa:
        for session, turn in _DIA.findall(raw):
            ref = (sample_id, f"D{int(session)}:{int(turn)}")
            if ref in where and ref not in seen:
                seen.add(ref)
                index, text = where[ref]
                story.facts.append(Fact(text, index, content_words(text)))
    story.facts.sort(key=lambda f: f.index)
    return story


def _normal(dia_id: str) -> str:
    found = _DIA.search(dia_id)
    return f"D{int(found.group(1))}:{int(found.group(2))}" if found else dia_id


# --- counting and tallies -----------------------------------------------------------------------


class Tokens:
    """A message's tokens (the tokenizer's count plus the per-message overhead), remembered by text."""

    def __init__(self) -> None:
        self.counter = default_counter()
        self._known: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        tokens = self._known.get(text)
        if tokens is None:
            tokens = self._known[text] = self.counter.count(text) + MESSAGE_OVERHEAD_TOKENS
        return tokens


@dataclass
class Tally:
    """One policy's figures, request by request."""

    name: str
    story: Story
    tokens: list[int] = field(default_factory=list)
    overlap: int = 0
    presence: dict[int, float] = field(default_factory=dict)  # turn of a checkpoint → fraction present
    _words: dict[str, frozenset[str]] = field(default_factory=dict)

    def request(self, tokens: int, overlap: int) -> None:
        self.tokens.append(tokens)
        self.overlap += overlap

    def checkpoint(self, turn: int) -> bool:
        return turn % CHECKPOINT_EVERY == 0 or turn == self.story.turns

    def facts_at(self, turn: int, contents: Sequence[str], summary: str) -> None:
        """Fact presence in the request for `turn` (its messages' contents, and the summary text in them)."""
        seen = [f for f in self.story.facts if f.index <= 2 * turn - 2]
        words = self._words.get(summary)
        if words is None:
            words = self._words[summary] = content_words(summary)
        verbatim = "\x00".join(contents)
        present = sum(f.present(verbatim, words) for f in seen)
        self.presence[turn] = present / len(seen) if seen else 1.0

    def figures(self) -> dict[str, float | int]:
        final = self.presence.get(self.story.turns, float("nan"))
        return {
            f"{self.name}_mean_prompt_tokens": sum(self.tokens) / len(self.tokens),
            f"{self.name}_max_prompt_tokens": max(self.tokens),
            f"{self.name}_overlap_tokens": self.overlap,
            f"{self.name}_fact_presence": final,
        }

    def report(self, seconds: float) -> None:
        marks = [v for t, v in self.presence.items() if t % CHECKPOINT_EVERY == 0]
        average = sum(marks) / len(marks) if marks else float("nan")
        log(
            f"{self.name}: mean {sum(self.tokens) / len(self.tokens):,.0f} tokens, max {max(self.tokens):,}, "
            f"overlap {self.overlap:,}, facts at the end {self.presence.get(self.story.turns, float('nan')):.3f}, "
            f"averaged over {len(marks)} checkpoints {average:.3f} ({seconds:.1f}s)"
        )


def _progress(name: str, turn: int, total: int, started: float) -> None:
    if turn % max(total // 5, 1) == 0:
        log(f"  {name}: {turn}/{total} turns, {time.perf_counter() - started:.1f}s")


# --- the three simulated policies -----------------------------------------------------------------


def replay_full(story: Story, tokens: Tokens, system: str) -> Tally:
    tally, started = Tally("full", story), time.perf_counter()
    prefix = _prefix([tokens(m) for m in story.messages])
    for turn in range(1, story.turns + 1):
        current = 2 * turn - 2
        tally.request(tokens(system) + prefix[current + 1], 0)
        if tally.checkpoint(turn):
            tally.facts_at(turn, [system, *story.messages[: current + 1]], "")
        _progress("full", turn, story.turns, started)
    tally.report(time.perf_counter() - started)
    return tally


def replay_sillytavern(story: Story, tokens: Tokens, system: str) -> Tally:
    tally, started = Tally("sillytavern", story), time.perf_counter()
    prefix = _prefix([tokens(m) for m in story.messages])
    summary, covered = "", 0  # the current summary and how many messages it was made from
    for turn in range(1, story.turns + 1):
        current = 2 * turn - 2
        note = f"[Summary: {summary}]" if summary else ""
        fixed = tokens(system) + (tokens(note) if note else 0) + tokens(story.messages[current])
        room = BUDGET - fixed
        first = bisect_left(prefix, prefix[current] - room, 0, current + 1)  # oldest message that still fits
        history = prefix[current] - prefix[first]
        overlap = prefix[covered] - prefix[first] if covered > first else 0
        tally.request(fixed + history, overlap)
        if tally.checkpoint(turn):
            tally.facts_at(turn, [system, *([note] if note else []), *story.messages[first : current + 1]], summary)
        said = 2 * turn  # the reply is in: the extension runs once every ST_EVERY_MESSAGES messages
        if said % ST_EVERY_MESSAGES == 0:
            summary = summarize_episode(story.lines(0, said), [CHAR, USER], ST_SUMMARY_CHARS, LANGUAGE)
            covered = said
        _progress("sillytavern", turn, story.turns, started)
    tally.report(time.perf_counter() - started)
    return tally


def replay_liyuan(story: Story, tokens: Tokens, system: str) -> Tally:
    tally, started = Tally("liyuan", story), time.perf_counter()
    prefix = _prefix([tokens(m) for m in story.messages])
    digest: dict[str, str] | None = None
    note, live = "", 1  # the replayed summary message, and the first live turn (turns before it are folded)
    for turn in range(1, story.turns + 1):
        current, start = 2 * turn - 2, 2 * live - 2
        replayed = prefix[current + 1] - prefix[start]  # the live turns start right after the last folded one
        tally.request(tokens(system) + (tokens(note) if note else 0) + replayed, 0)
        if tally.checkpoint(turn):
            tally.facts_at(turn, [system, *([note] if note else []), *story.messages[start : current + 1]], note)
        if turn - live + 1 >= LIYUAN_KEEP + LIYUAN_PERIOD:
            last = turn - LIYUAN_KEEP  # the last covered turn
            lines = story.lines(start, 2 * last)
            if len("\n\n".join(f"{line.speaker}：{line.text}" for line in lines)) >= LIYUAN_MIN_CHARS:
                episode = summarize_episode(lines, [CHAR, USER], language=LANGUAGE)
                latest = story.lines(2 * (last - LATEST_TURNS), 2 * last)
                digest = fold_digest(digest, [(live, last, episode)], latest, [CHAR, USER], language=LANGUAGE)
                note, live = f"{OPENER}\n\n{_digest_text(digest)}", last + 1
        _progress("liyuan", turn, story.turns, started)
    tally.report(time.perf_counter() - started)
    return tally


def _digest_text(sections: dict[str, str]) -> str:
    """The sections as Changji renders a digest (`Digest.text`): `## name` and the body, empty ones left out."""
    shown = TEXTS.digest_headings
    return "\n\n".join(
        f"## {shown[name]}\n{sections[name].strip()}" for name in DIGEST_SECTIONS if sections[name].strip()
    )


def _prefix(values: Sequence[int]) -> list[int]:
    out = [0]
    for value in values:
        out.append(out[-1] + value)
    return out


# --- Changji itself -----------------------------------------------------------------------------


async def replay_changji(story: Story, tokens: Tokens, system: str) -> Tally:
    tally, started = Tally("changji", story), time.perf_counter()
    app = Changji(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    card_id, story_id, root_id = uuid4(), uuid4(), uuid4()
    app.cards.create_card(card_id, TENANT, CARD, SETTINGS)
    app.stories.start_story(story_id, root_id, TENANT, card_id, 0, "tokens bench", {})
    loaded = app.story(TENANT, story_id)
    card, settings = app.card_of(loaded).data, app.settings(loaded)
    renders, windows = RenderCache(tokens.counter), WindowCache()
    worker = CompactWorker(app, Inline(), None)
    compactions, drift = 0, 0
    for turn in range(1, story.turns + 1):
        user, reply = story.messages[2 * turn - 2], story.messages[2 * turn - 1]
        leaf = app.stories.append_node(TENANT, story_id, uuid4(), "user", user).node
        epoch = app.render_epoch(story_id)
        context = assemble_context(
            card, settings, walk_up(app.node, leaf.id), renders, windows, epoch, None, app.node,
            recorded=app.summarized(story_id),
        )  # fmt: skip
        contents = [m.content for m in context.messages]
        counted = sum(tokens(c) for c in contents)
        drift = max(drift, abs(counted - context.tokens))
        tally.request(counted, _changji_overlap(app, context.explain, tokens))
        if tally.checkpoint(turn):
            summary = next((c for c in contents if c.startswith(OPENER)), "")
            tally.facts_at(turn, contents, summary)
        answer = app.stories.append_node(TENANT, story_id, uuid4(), "reply", reply).node
        if app.node_aggregate(answer.id).jobs.get("compact") == "pending":
            done = await worker.compact(answer.id, False, answer.id)
            if isinstance(done, Failed):
                raise RuntimeError(f"compaction at turn {turn} failed: {done}")
            app.jobs.finish_job(answer.id, "compact", done.detail)
            compactions += 1
        _progress("changji", turn, story.turns, started)
    log(f"changji: {compactions} compactions; largest gap between this count and Context.tokens: {drift} tokens")
    tally.report(time.perf_counter() - started)
    return tally


def _changji_overlap(app: Changji, explain: Sequence[Any], tokens: Tokens) -> int:
    """Tokens of verbatim nodes whose depth lies in a digest's or an episode's `covers` range."""
    ranges = [b.covers for b in explain if b.what in ("digest", "episode") and b.covers is not None]
    if not ranges:
        return 0
    overlap = 0
    for block in explain:
        if block.what != "verbatim":
            continue
        for node_id in block.node_ids:
            node = app.node(node_id)
            if any(low <= node.depth <= high for low, high in ranges):
                overlap += tokens(node.text)
    return overlap


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    args = parse_args(__doc__)
    turns = sized(args, 2000, 300, 50)
    started = time.perf_counter()
    story = build(turns)
    final_facts = sum(f.index <= 2 * story.turns - 2 for f in story.facts)
    log(f"story: {story.turns} turns ({story.sources}), {len(story.messages)} messages, {final_facts} facts")
    tokens = Tokens()
    system = build_system_prompt(CARD, USER, TEXTS)
    tallies = [
        replay_full(story, tokens, system),
        replay_sillytavern(story, tokens, system),
        replay_liyuan(story, tokens, system),
        asyncio.run(replay_changji(story, tokens, system)),
    ]
    figures: dict[str, float | int] = {}
    for tally in tallies:
        figures.update(tally.figures())
    figures["turns"] = story.turns
    figures["facts"] = final_facts
    figures["smoke"] = args.smoke
    log(f"done in {time.perf_counter() - started:.1f}s")
    emit(figures)


if __name__ == "__main__":
    main()
