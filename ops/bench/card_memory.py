"""Card memory end to end: does a new story of a card start with what the card's earlier stories left?

    python ops/bench/card_memory.py [--quick | --smoke]

The service runs in this process behind a real HTTP server on loopback. Each LoCoMo conversation (10;
--quick: 2; --smoke: the first, cut after 60 messages) becomes a card (speaker B) with one story per
session, played through the HTTP API in bring-your-own mode (speaker A as the user; a run of one
speaker's messages as one node); after each session the card's memory is synced (`POST …/memory/sync`,
what a quiet spell does by itself). Then a new story of the card opens with the user's words and its
first context (`GET …/context`) is read: for each question with an answer (LoCoMo's answer text; the
adversarial ones have none), is the answer in it — word for word (case aside), and by half its content
words. Then the same new story opened with the question itself (each on a branch of its own at the
greeting): the resident summary and what recall over the card's memory finds for the words; the
question's own words are not counted. Beside them, the simplest carry-over at the same cost: the newest
messages of the earlier sessions that fit the tokens the offline card memory's contexts took. Twice: with no side model (the offline recaps and merge), and with the rule-played side model on
the fake server (`providers/fake_memory.py`: it shows the pipeline's path through the real client and
checks, not what a hosted model would write). The floor is the same context with the card's memory off.

Then the debounce: one story of 1,000 turns (--smoke: 120) played through the HTTP API with the background
sweep running at the default settings (a recap after 40 new turns or 10 minutes of quiet) and the fake
side model: its calls, and the characters it was sent, per 1,000 turns. And the turn path: the median of
a bring-your-own turn (the user's words, the context, the reply) on a story whose card has a resident
summary, with card memory on and off, turns interleaved (`turn_memory_on_vs_off_ratio`).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from _common import LocomoConversation, content_words, emit, figure_keys, locomo, log, parse_args, sized
from aiohttp import web
from memory_fidelity import Client

from api.app import create_app
from api.bootstrap import bootstrap
from api.settings import ModelSettings, Settings
from providers.fake_memory import memory_writer
from providers.fake_server import FakeModelServer
from providers.tokens import default_counter

TENANT = "card-memory"
OPENING = "Hey, it's me again. Do you remember what we talked about before?"
FULL: dict[str, Any] = {"conversations": None, "cut": None, "long_turns": 1000, "latency_turns": 200}
QUICK: dict[str, Any] = {"conversations": 2, "cut": None, "long_turns": 1000, "latency_turns": 100}
SMOKE: dict[str, Any] = {"conversations": 1, "cut": 60, "long_turns": 120, "latency_turns": 20}
MODES = ("offline", "model")
FLOOR = ("floor",)
FIGURES = figure_keys(
    "answer_in_first_context_{mode}", "answer_words_in_first_context_{mode}", "answer_in_context_asked_{mode}",
    "answer_words_in_context_asked_{mode}", "first_context_tokens_{mode}", "context_asked_tokens_{mode}",
    "resident_chars_{mode}", "side_calls_per_story_{mode}",
    "questions", "stories", "answer_in_recent_tail_same_tokens", "answer_words_in_recent_tail_same_tokens", "side_calls_per_1000_turns", "side_input_chars_per_1000_turns",
    "recaps_per_1000_turns", "turn_memory_on_ms", "turn_memory_off_ms", "turn_memory_on_vs_off_ratio",
    "quick", "smoke", "bench_s",
    mode=MODES,
) | figure_keys(
    "answer_in_first_context_{mode}", "answer_words_in_first_context_{mode}", "answer_in_context_asked_{mode}",
    "answer_words_in_context_asked_{mode}", "first_context_tokens_{mode}", "context_asked_tokens_{mode}",
    mode=FLOOR,
)  # fmt: skip


class Service:
    """The service on loopback, with the fake side model or none."""

    def __init__(self, tmp: Path, side: FakeModelServer | None, sweep_seconds: float = 3600.0) -> None:
        self.tmp, self.side, self.sweep_seconds = tmp, side, sweep_seconds

    async def __aenter__(self) -> Client:
        model = ModelSettings(base_url=self.side.url, model="fake-side", max_retries=0) if self.side else None
        settings = Settings(
            data_dir=self.tmp,
            port=0,
            embedder="hashing",
            side_model=model or ModelSettings(),
            memory_sweep_seconds=self.sweep_seconds,
        )
        service = bootstrap(settings)
        _, key = service.keys.create_key(TENANT, "ops/bench/card_memory.py")
        self.runner = web.AppRunner(create_app(settings, service), access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.session = aiohttp.ClientSession()
        return Client(self.session, f"http://127.0.0.1:{self.runner.addresses[0][1]}", key)

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()
        await self.runner.cleanup()


def sessions(conversation: LocomoConversation) -> list[list[tuple[bool, str]]]:
    """Per session, (is the user, text) per node: a run of one speaker's messages is one node."""
    out: dict[int, list[tuple[bool, str]]] = {}
    for m in conversation.messages:
        nodes = out.setdefault(m.session, [])
        is_user = m.speaker == conversation.speaker_a
        if nodes and nodes[-1][0] == is_user:
            nodes[-1] = (is_user, nodes[-1][1] + "\n" + m.text)
        else:
            nodes.append((is_user, m.text))
    return [out[k] for k in sorted(out)]


async def play_card(client: Client, conversation: LocomoConversation, memory: bool) -> tuple[str, int]:
    """The card and its stories, one per session, synced after each; (card id, stories)."""
    card = await client.call(
        "POST", "/v1/cards",
        {"card": {"name": conversation.speaker_b, "first_mes": "Hi!"},
         "settings": {"user_name": conversation.speaker_a, "card_memory": memory}},
    )  # fmt: skip
    played = 0
    for nodes in sessions(conversation):
        story = await client.call("POST", "/v1/stories", {"card_id": card["id"]})
        if nodes and not nodes[0][0]:
            nodes = [(True, "Hi!"), *nodes]
        for is_user, text in nodes:
            body = {"kind": "user" if is_user else "reply", "text": text}
            await client.call("POST", f"/v1/stories/{story['id']}/nodes", body)
        played += 1
        if memory:
            await client.call("POST", f"/v1/cards/{card['id']}/memory/sync")
    return card["id"], played


def found(context: dict[str, Any], answer: str, asked: str = "") -> tuple[bool, bool]:
    """Whether the answer is in the context word for word (case aside), and by half its content words —
    the user's own words (`asked`) not counted: what the question already says is no memory."""
    text = "\n".join(m["content"] for m in context["messages"])
    if asked:
        text = text.replace(asked, "")
    words = content_words(answer)
    have = content_words(text)
    return answer.lower() in text.lower(), bool(words) and len(words & have) * 2 >= len(words)


async def first_context(client: Client, card_id: str) -> tuple[dict[str, Any], str, str]:
    """The first context of a new story of the card opened with OPENING; (context, story id, greeting id)."""
    story = await client.call("POST", "/v1/stories", {"card_id": card_id})
    greeting = story["leaf_id"]
    node = await client.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": OPENING})
    context: dict[str, Any] = await client.call("GET", f"/v1/stories/{story['id']}/context?at={node['node']['id']}")
    return context, story["id"], greeting


async def asked_context(client: Client, story_id: str, greeting: str, question: str) -> dict[str, Any]:
    """The first context of the new story opened with the question instead (a branch at its greeting)."""
    body = {"kind": "user", "text": question, "parent_id": greeting}
    node = await client.call("POST", f"/v1/stories/{story_id}/nodes", body)
    context: dict[str, Any] = await client.call("GET", f"/v1/stories/{story_id}/context?at={node['node']['id']}")
    return context


async def recall_rates(plan: dict[str, Any], tmp: Path) -> dict[str, float]:
    conversations = locomo(plan["conversations"], plan["cut"])
    if not conversations:
        raise SystemExit("LoCoMo is needed for this benchmark")
    figures: dict[str, float] = {}
    for mode in (*MODES, "floor"):
        async with FakeModelServer(fallback=memory_writer()) as fake:
            side = fake if mode == "model" else None
            async with Service(tmp / mode, side) as client:
                counts = dict.fromkeys(("hits", "words", "asked_hits", "asked_words", "asked", "asked_tokens"), 0)
                stories = tokens = resident = 0
                for conversation in conversations:
                    card_id, played = await play_card(client, conversation, mode != "floor")
                    context, story_id, greeting = await first_context(client, card_id)
                    tokens += context["tokens"]
                    resident += sum(b["chars"] for b in context["explain"] if b["what"] == "resident")
                    stories += played
                    for question in conversation.questions:
                        if not question.answer:
                            continue
                        exact, half = found(context, question.answer)
                        asked = await asked_context(client, story_id, greeting, question.question)
                        exact_asked, half_asked = found(asked, question.answer, question.question)
                        for key, value in (
                            ("hits", exact), ("words", half), ("asked_hits", exact_asked),
                            ("asked_words", half_asked), ("asked", 1), ("asked_tokens", asked["tokens"]),
                        ):  # fmt: skip
                            counts[key] += int(value)
                n, asked_n = len(conversations), max(counts["asked"], 1)
                figures[f"answer_in_first_context_{mode}"] = counts["hits"] / asked_n
                figures[f"answer_words_in_first_context_{mode}"] = counts["words"] / asked_n
                figures[f"answer_in_context_asked_{mode}"] = counts["asked_hits"] / asked_n
                figures[f"answer_words_in_context_asked_{mode}"] = counts["asked_words"] / asked_n
                figures[f"first_context_tokens_{mode}"] = tokens / n
                figures[f"context_asked_tokens_{mode}"] = counts["asked_tokens"] / asked_n
                if mode != "floor":
                    figures[f"resident_chars_{mode}"] = resident / n
                    calls = sum(1 for body in fake.requests if _memory_call(body))
                    figures[f"side_calls_per_story_{mode}"] = calls / max(stories, 1)
                figures["questions"], figures["stories"] = counts["asked"], stories
                log(
                    f"{mode}: of {counts['asked']} answers, opened with a greeting {counts['hits']} word for word"
                    f" ({counts['words']} by half their words); opened with the question {counts['asked_hits']}"
                    f" ({counts['asked_words']})"
                )
    figures.update(tail_baseline(conversations, figures["context_asked_tokens_offline"]))
    return figures


def tail_baseline(conversations: list[LocomoConversation], tokens: float) -> dict[str, float]:
    """The simplest carry-over at the same cost: the newest messages of the earlier sessions that fit the
    mean tokens the offline card memory's contexts took."""
    counter = default_counter()
    hits = words = asked = 0
    for conversation in conversations:
        tail, used = [], 0
        for message in reversed(conversation.messages):
            line = f"{message.speaker}: {message.text}"
            used += counter.count(line)
            if used > tokens:
                break
            tail.append(line)
        context = {"messages": [{"content": "\n".join(reversed(tail))}]}
        for question in conversation.questions:
            if question.answer:
                exact, half = found(context, question.answer)
                hits, words, asked = hits + exact, words + half, asked + 1
    return {
        "answer_in_recent_tail_same_tokens": hits / max(asked, 1),
        "answer_words_in_recent_tail_same_tokens": words / max(asked, 1),
    }


def _memory_call(body: dict[str, Any]) -> bool:
    system = str(body.get("messages", [{}])[0].get("content", ""))
    return "复盘" in system or "recap" in system or "记忆手册" in system or "memory handbook" in system


async def debounce(turns: int, tmp: Path) -> dict[str, float]:
    """One long story with the sweep at work: the side calls it costs per 1,000 turns."""
    async with FakeModelServer(fallback=memory_writer()) as fake, Service(tmp / "long", fake, 0.5) as client:
        card = await client.call("POST", "/v1/cards", {"card": {"name": "Mara", "first_mes": "Hi."}})
        story = await client.call("POST", "/v1/stories", {"card_id": card["id"]})
        for i in range(turns):
            await client.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": f"Turn {i}: where?"})
            await client.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": f"At mark {i}."})
        await asyncio.sleep(2.0)  # (the last sweep's work)
        memory = await client.call("GET", f"/v1/cards/{card['id']}/memory")
        bodies = [b for b in fake.requests if _memory_call(b)]
        sent = sum(len(m["content"]) for b in bodies for m in b["messages"])
        recaps = memory["recaps"][0]["version"] if memory["recaps"] else 0
        scale = 1000 / turns
        log(f"{turns} turns: {len(bodies)} side calls, {recaps} recaps, {sent} characters sent")
        return {
            "side_calls_per_1000_turns": len(bodies) * scale,
            "side_input_chars_per_1000_turns": sent * scale,
            "recaps_per_1000_turns": recaps * scale,
        }


async def turn_latency(turns: int, tmp: Path) -> dict[str, float]:
    """A bring-your-own turn with card memory on and off, interleaved, on cards with a resident summary."""
    async with Service(tmp / "latency", None) as client:
        stories = {}
        for memory in (True, False):
            card = await client.call(
                "POST", "/v1/cards", {"card": {"name": "Mara", "first_mes": "Hi."}, "settings": {"card_memory": memory}}
            )
            first = await client.call("POST", "/v1/stories", {"card_id": card["id"], "settings": {"card_memory": True}})
            await client.call("POST", f"/v1/stories/{first['id']}/nodes", {"kind": "user", "text": "The lamp is lit."})
            await client.call("POST", f"/v1/stories/{first['id']}/nodes", {"kind": "reply", "text": "It burns low."})
            await client.call("POST", f"/v1/cards/{card['id']}/memory/sync")
            await client.call("PUT", f"/v1/cards/{card['id']}/memory/resident", {"text": "Mara keeps the lamp. " * 50})
            stories[memory] = (await client.call("POST", "/v1/stories", {"card_id": card["id"]}))["id"]
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(turns):
            for memory in (True, False) if i % 2 else (False, True):
                sid = stories[memory]
                started = time.perf_counter()
                await client.call("POST", f"/v1/stories/{sid}/nodes", {"kind": "user", "text": f"Turn {i}: the lamp?"})
                context = await client.call("GET", f"/v1/stories/{sid}/context")
                await client.call("POST", f"/v1/stories/{sid}/nodes", {"kind": "reply", "text": f"Still lit, {i}."})
                times[memory].append(time.perf_counter() - started)
                if i == 0:
                    carried = any(b["what"] == "resident" for b in context["explain"])
                    assert carried == memory, "the resident summary is carried exactly when card memory is on"
        on, off = statistics.median(times[True]) * 1000, statistics.median(times[False]) * 1000
        log(f"a turn: {on:.1f} ms with card memory, {off:.1f} ms without")
        return {"turn_memory_on_ms": on, "turn_memory_off_ms": off, "turn_memory_on_vs_off_ratio": on / off}


async def run(plan: dict[str, Any]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="changji-card-memory-") as tmp:
        figures = await recall_rates(plan, Path(tmp))
        figures.update(await debounce(plan["long_turns"], Path(tmp)))
        figures.update(await turn_latency(plan["latency_turns"], Path(tmp)))
        return figures


def main() -> None:
    args = parse_args(__doc__)
    started = time.perf_counter()
    figures: dict[str, Any] = asyncio.run(run(sized(args, FULL, QUICK, SMOKE)))
    figures.update({"quick": int(args.quick), "smoke": int(args.smoke), "bench_s": time.perf_counter() - started})
    emit(figures)


if __name__ == "__main__":
    main()
