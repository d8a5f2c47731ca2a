"""The chat-completions proxy: what the upstream receives against what the front end sends, and the
proxy's own time per request, against the fake model on loopback.

    python ops/bench/proxy.py [--quick | --smoke]

The service runs in process (aiohttp's test server, the real app, data on SQLite in a temp dir,
CHANGJI_EMBEDDER none); the upstream is the fake model server, answering a fixed reply at once.

- **Tokens** (`tokens_client_<n>`, `tokens_upstream_<n>` at turns n): a front end plays `--turns`
  turns (2,000; --quick 400) through the proxy the way front ends do — its whole history every time —
  with MemoryBank turn texts; the tokens of the messages it sent and of those the upstream received,
  counted with the service's counter, at a few points of the chat. The card's window is 8,192 tokens.
- **Proxy time at 1k and 10k turns** (`proxy_p50_ms_<n>`, `proxy_p99_ms_<n>`): a chat of n turns
  imported (SillyTavern `.jsonl`), then 40 requests continuing it (non-streamed), each sending the
  whole history; the proxy's own time is the request's wall time less the upstream's, which is the
  same forwarded request timed straight against the fake (`upstream_ms_<n>`). `proxy_p50_ratio`: 10k
  over 1k. The wall time holds the front end's body crossing loopback into an aiohttp server, which any
  server pays, a plain one too: `transport_ms_<n>` is the same body posted to an aiohttp handler that
  reads it and answers `{}`, and `proxy_net_p50_ms_<n>` the proxy's own time less that. The first
  request of each chat (read whole, its story's caches cold) is apart: `first_ms_<n>`; p50 and p99 are of
  the 35 after the first 5.
- **A chat cut to its last 40 messages** (`proxy_cut_p50_ms_<n>`), as a front end sends it once the
  chat is longer than its context size: 25 more requests (the first 5 left out), the upstream's time
  (the last measured) less; the request's size does not grow with the story, so this is the proxy's
  cost of the story's length alone.
- **An edit in a cut chat** (`proxy_cut_edit_p50_ms_<n>`, `proxy_cut_edit_p50_ratio` 10k over 1k): the
  cut chat with its user message three back edited and new words sent (a branch found by the chat's
  content, wherever it lies in the tree), 20 requests (the first 4 left out), the upstream's time less.
- **Time to first chunk** (`first_chunk_added_ms_<n>`): streamed, the first chunk's arrival through
  the proxy less straight from the fake, median.
- **The client's budget** (`budget_client_<n>`, `budget_upstream_<n>`, `budget_facts_<n>` at turns n =
  100, 500, 1,000, 2,000; --quick 100, 400): a front end that cuts its chat to a 4,096-token context the
  way SillyTavern does (its system prompt, then the newest messages that fit) plays the chat; facts
  planted in its first turns ("my sister's name is …") are asked about at each mark, and
  `budget_facts_<n>` is the share of them whose words reach the upstream. `budget_over` counts requests
  whose upstream messages held more tokens than the client sent (the rule: none).

--smoke: counts at turns 2, 4, 6 and 8, the client's budget at 5–8, chats of 30 and 40 turns with 3, 2 and 2
requests (the first of each left out), the job queue swept every 0.1 s (not 2: each mark waits for the
chat's jobs), under the full run's keys (`FIGURES`).

Progress goes to stderr; the figures are one JSON object on the last line of stdout.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from _common import emit, figure_keys, log, parse_args, percentile, sized, texts
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from api.app import create_app
from api.keys import SERVICE
from api.server import Runner
from api.settings import ModelSettings, Settings
from interchange.chat_export import ChatExportMessage, write_chat
from providers.fake_server import FakeModelServer, Text
from providers.tokens import default_counter

SYSTEM = "You are Mira, a ferry pilot on a foggy northern coast. Stay in character; answer in a few lines."
GREETING = "The ferry horn sounds twice. 'Last crossing tonight,' Mira says, coiling the rope."
REPLY = "'Hold the rail,' Mira says, and the ferry leans into the swell."
CARD_SETTINGS = {"context_window": 8192, "reply_reserve": 1024}
FULL: dict[str, Any] = {
    "tokens": (100, 500, 1000, 2000),  # the turns the tokens are counted at (the chat ends at the last)
    "budget": (100, 500, 1000, 2000),  # the turns the client's budget is tried at
    "sizes": (1000, 10_000),  # the chats the proxy's time is measured on, in turns
    "requests": (40, 25, 20),  # on each: the whole chat, the chat cut, an edit in the cut chat
    "left_out": (5, 5, 4),  # the first requests of each, left out of the medians
    "sweep_seconds": 2.0,  # between the service's sweeps of its job queue (its default)
}
QUICK: dict[str, Any] = {**FULL, "tokens": (20, 100, 200, 400), "budget": (100, 400), "sizes": (1000, 3000)}
SMOKE: dict[str, Any] = {
    "tokens": (2, 4, 6, 8), "budget": (5, 6, 7, 8), "sizes": (30, 40), "requests": (3, 2, 2), "left_out": (1, 1, 1),
    "sweep_seconds": 0.1, "names": FULL,  # the keys carry the full run's turns
}  # fmt: skip
FIGURES = figure_keys(
    "tokens_client_{t}", "tokens_upstream_{t}", "budget_client_{b}", "budget_upstream_{b}", "budget_facts_{b}",
    "budget_over", "proxy_cut_edit_p50_ms_{n}", "proxy_cut_p50_ms_{n}", "first_ms_{n}", "transport_ms_{n}",
    "proxy_net_p50_ms_{n}", "proxy_p50_ms_{n}", "proxy_p99_ms_{n}", "upstream_ms_{n}", "first_chunk_added_ms_{n}",
    "proxy_p50_ratio", "proxy_cut_edit_p50_ratio", "quick", "smoke", "bench_s",
    t=FULL["tokens"], b=FULL["budget"], n=FULL["sizes"],
)  # fmt: skip


class Served(TestServer):
    async def _make_runner(self, **kwargs: Any) -> Runner:
        return Runner(self.app, **kwargs)


async def main_async(plan: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    named = plan.get("names", plan)

    def labelled(key: str) -> dict[int, int]:  # a size of the plan → the number its keys carry
        return dict(zip(plan[key], named[key], strict=True))

    pool = texts()
    said = count(1)  # (each reply its own words, as a model's are: a chat is found by what its messages say)
    async with FakeModelServer(fallback=lambda body: Text(f"{REPLY} ({next(said)})")) as fake:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(
                data_dir=Path(tmp), embedder="none", main_model=ModelSettings(base_url=fake.url, model="fake-model"),
                job_sweep_seconds=plan["sweep_seconds"],
            )  # fmt: skip
            client = TestClient(Served(create_app(settings)))
            await client.start_server()
            try:
                _, key = client.app[SERVICE].keys.create_key("bench")
                headers = {"Authorization": f"Bearer {key}"}
                await tokens(client, headers, fake, pool, labelled("tokens"), figures)
                await budget(client, headers, fake, pool, labelled("budget"), figures)
                for turns, name in labelled("sizes").items():
                    await proxy_time(client, headers, fake, pool, turns, name, plan, figures)
            finally:
                await client.close()
    small, large = named["sizes"]
    figures["proxy_p50_ratio"] = figures[f"proxy_p50_ms_{large}"] / max(figures[f"proxy_p50_ms_{small}"], 1e-9)
    figures["proxy_cut_edit_p50_ratio"] = figures[f"proxy_cut_edit_p50_ms_{large}"] / max(
        figures[f"proxy_cut_edit_p50_ms_{small}"], 1e-9
    )
    return figures


CONTEXT = 4096  # the front end's context size, SillyTavern's default
FACTS = [  # planted in the chat's first turns, asked about later: (what the user says, the question, the words)
    ("By the way, my sister's name is Brigid Ostrander and she keeps bees.", "What was my sister's name again?",
     "Brigid Ostrander"),
    ("I left my grandfather's brass compass on the ferry's third bench.", "Where did I leave the compass?",
     "third bench"),
    ("My dog is a grey lurcher called Pemberton.", "What is my dog called?", "Pemberton"),
    ("I was born in the harbour town of Kestrelwick.", "Which town was I born in?", "Kestrelwick"),
]  # fmt: skip


def _cut(system: dict[str, str], chat: list[dict[str, str]], counter: Any) -> list[dict[str, str]]:
    """The system prompt and the newest messages that fit CONTEXT tokens, as SillyTavern sends a long chat."""
    room = CONTEXT - _tokens(counter, [system])
    kept: list[dict[str, str]] = []
    for message in reversed(chat):
        room -= _tokens(counter, [message])
        if room < 0:
            break
        kept.append(message)
    return [system, *reversed(kept)]


async def budget(
    client: TestClient[Any, Any],
    headers: dict[str, str],
    fake: FakeModelServer,
    pool: Any,
    marks: dict[int, int],
    figures: dict[str, Any],
) -> None:
    """The chat cut to the client's budget, played to the last of `marks` (a turn → the number its keys carry)."""
    counter = default_counter()
    system = {"role": "system", "content": SYSTEM + " (the lighthouse chat)"}
    chat: list[dict[str, str]] = [{"role": "assistant", "content": GREETING}]
    story, over = None, 0
    for i in range(1, max(marks) + 1):
        user = FACTS[i - 1][0] if i <= len(FACTS) else pool.pair(i)[0]
        chat.append({"role": "user", "content": user})
        sent = _cut(system, chat, counter)
        answer = await _post(client, headers, {"model": "fake-model", "messages": sent})
        over += _tokens(counter, fake.requests[-1]["messages"]) > _tokens(counter, sent)
        chat.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
        story = story or answer["_story"]
        if i in marks:
            n = marks[i]
            await _settle(client, headers, story)
            found = 0
            for _, question, words in FACTS:
                asked = _cut(system, [*chat, {"role": "user", "content": question}], counter)
                await _post(client, headers, {"model": "fake-model", "messages": asked})
                upstream = fake.requests[-1]["messages"]
                found += any(words in str(m.get("content") or "") for m in upstream)
                over += _tokens(counter, upstream) > _tokens(counter, asked)
                figures[f"budget_client_{n}"] = _tokens(counter, asked)
                figures[f"budget_upstream_{n}"] = _tokens(counter, upstream)
            figures[f"budget_facts_{n}"] = found / len(FACTS)
            log(f"turn {i}: a cut chat sent {figures[f'budget_client_{n}']:,} tokens, the upstream got "
                f"{figures[f'budget_upstream_{n}']:,}; facts from the first turns in it: "
                f"{found}/{len(FACTS)}")  # fmt: skip
        elif i % 200 == 0:
            await _settle(client, headers, story)
    figures["budget_over"] = over


def _chat(pool: Any, turns: int) -> list[dict[str, str]]:
    chat: list[dict[str, str]] = []
    for i in range(turns):
        user, _ = pool.pair(i)
        chat += [{"role": "user", "content": user}, {"role": "assistant", "content": f"{REPLY} [{i}]"}]
    return chat


def _opening() -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "assistant", "content": GREETING}]


def _tokens(counter: Any, messages: list[dict[str, Any]]) -> int:
    return sum(counter.count(str(m.get("content") or "")) + 4 for m in messages)


async def _post(client: TestClient[Any, Any], headers: dict[str, str], body: dict[str, Any] | bytes) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    sent = {**headers, "Content-Type": "application/json"}
    async with client.post("/v1/chat/completions", data=data, headers=sent) as response:
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
        answer["_story"] = response.headers["X-Changji-Story"]
        return answer


async def tokens(
    client: TestClient[Any, Any],
    headers: dict[str, str],
    fake: FakeModelServer,
    pool: Any,
    marks: dict[int, int],
    figures: dict[str, Any],
) -> None:
    """A chat played to the last of `marks` (a turn → the number its keys carry), sent whole every time."""
    history: list[dict[str, str]] = []
    story = None
    for i in range(1, max(marks) + 1):
        user, _ = pool.pair(i)
        history.append({"role": "user", "content": user})
        messages = [*_opening(), *history]
        answer = await _post(client, headers, {"model": "fake-model", "messages": messages})
        history.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
        if story is None:
            story = answer["_story"]
            card = (await (await client.get(f"/v1/stories/{story}", headers=headers)).json())["card_id"]
            await client.patch(f"/v1/cards/{card}", json={"settings": CARD_SETTINGS}, headers=headers)
        if i in marks:
            n = marks[i]
            figures[f"tokens_client_{n}"] = _tokens(default_counter(), messages)
            figures[f"tokens_upstream_{n}"] = _tokens(default_counter(), fake.requests[-1]["messages"])
            log(f"turn {i}: the client sent {figures[f'tokens_client_{n}']:,} tokens, the upstream got "
                f"{figures[f'tokens_upstream_{n}']:,}")  # fmt: skip
        if i % 200 == 0:
            await _settle(client, headers, story)


async def _settle(client: TestClient[Any, Any], headers: dict[str, str], story: str | None) -> None:
    for _ in range(600):
        jobs = await (await client.get(f"/v1/stories/{story}/jobs", headers=headers)).json()
        if jobs.get("settled"):
            return
        await asyncio.sleep(0.05)


async def proxy_time(
    client: TestClient[Any, Any],
    headers: dict[str, str],
    fake: FakeModelServer,
    pool: Any,
    turns: int,
    name: int,
    plan: dict[str, Any],
    figures: dict[str, Any],
) -> None:
    """The proxy's time on a chat of `turns` turns, imported; its keys carry `name`."""
    requests, cuts, edited = plan["requests"]
    skip, skip_cut, skip_edit = plan["left_out"]
    chat = _chat(pool, turns)
    card = await (await client.post("/v1/cards", json={"card": {"name": "Mira", "first_mes": GREETING}, "settings": CARD_SETTINGS}, headers=headers)).json()  # fmt: skip
    now = datetime.now(UTC)
    rows = [ChatExportMessage("greeting", GREETING, now, "Mira", False)] + [
        ChatExportMessage("user" if m["role"] == "user" else "reply", m["content"], now, "User" if m["role"] == "user" else "Mira", False)
        for m in chat
    ]  # fmt: skip
    raw = write_chat(rows, user_name="User", character_name="Mira", created_at=now)
    async with client.post(f"/v1/stories/import?card_id={card['id']}", data=raw, headers=headers) as response:
        story = (await response.json())["story"]["id"]
    await _settle(client, headers, story)
    session = aiohttp.ClientSession()
    walls, ups, firsts, bare = [], [], [], []
    plain = web.Application()
    plain.router.add_post("/", _plain)
    floor = TestClient(TestServer(plain))
    await floor.start_server()
    try:
        for i in range(requests):
            user, _ = pool.pair(turns + i)
            chat.append({"role": "user", "content": user})
            body = orjson.dumps({"model": "fake-model", "messages": [*_opening(), *chat], "user": story})
            started = time.perf_counter()  # (the body encoded before: the front end's cost, not the proxy's)
            answer = await _post(client, headers, body)
            walls.append(time.perf_counter() - started)
            chat.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
            forwarded = {**fake.requests[-1], "stream": False}
            started = time.perf_counter()
            async with session.post(f"{fake.url}/chat/completions", json=forwarded) as direct:
                await direct.read()
            ups.append(time.perf_counter() - started)
            started = time.perf_counter()
            async with floor.post("/", data=body, headers={"Content-Type": "application/json"}) as plainly:
                await plainly.read()
            bare.append(time.perf_counter() - started)
            if i % 4 == 0:
                firsts.append(await _first_chunk_added(client, headers, session, fake, chat, story))
        cut = []  # the same chat cut to its last 40 messages, as a front end at its context size sends it
        for i in range(cuts):
            user, _ = pool.pair(turns + requests + i)
            chat.append({"role": "user", "content": user})
            body = orjson.dumps(
                {"model": "fake-model", "messages": [{"role": "system", "content": SYSTEM}, *chat[-41:]]}
            )
            started = time.perf_counter()
            answer = await _post(client, headers, body)
            cut.append(time.perf_counter() - started - ups[-1])
            chat.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
            assert answer["_story"] == story
        edits = []  # the cut chat with its user message three back edited, and new words: a branch
        for i in range(edited):
            user, _ = pool.pair(turns + 2 * requests + i)
            sent = [{"role": "system", "content": SYSTEM}, *chat[-40:]]
            sent[-3] = {"role": "user", "content": f"{sent[-3]['content']} (edited {i})"}
            body = orjson.dumps({"model": "fake-model", "messages": [*sent, {"role": "user", "content": user}]})
            started = time.perf_counter()
            answer = await _post(client, headers, body)
            edits.append(time.perf_counter() - started - ups[-1])
            assert answer["_story"] == story
    finally:
        await session.close()
        await floor.close()
    n = name
    figures[f"proxy_cut_edit_p50_ms_{n}"] = statistics.median(edits[skip_edit:]) * 1000
    figures[f"proxy_cut_p50_ms_{n}"] = statistics.median(cut[skip_cut:]) * 1000
    figures[f"first_ms_{n}"] = (walls[0] - ups[0]) * 1000
    own = [max(w - u, 0.0) for w, u in zip(walls, ups, strict=True)]
    net = [max(w - u - b, 0.0) for w, u, b in zip(walls[skip:], ups[skip:], bare[skip:], strict=True)]
    figures[f"transport_ms_{n}"] = statistics.median(bare) * 1000
    figures[f"proxy_net_p50_ms_{n}"] = statistics.median(net) * 1000
    figures[f"proxy_p50_ms_{n}"] = statistics.median(own[skip:]) * 1000
    figures[f"proxy_p99_ms_{n}"] = percentile(own[skip:], 99) * 1000
    figures[f"upstream_ms_{n}"] = statistics.median(ups) * 1000
    figures[f"first_chunk_added_ms_{n}"] = statistics.median(firsts) * 1000
    log(f"{turns} turns: proxy p50 {figures[f'proxy_p50_ms_{n}']:.1f} ms, p99 {figures[f'proxy_p99_ms_{n}']:.1f} ms, "
        f"net of the body's transport {figures[f'proxy_net_p50_ms_{n}']:.1f} ms; "
        f"first {figures[f'first_ms_{n}']:.0f} ms; cut chat {figures[f'proxy_cut_p50_ms_{n}']:.1f} ms, "
        f"an edit in it {figures[f'proxy_cut_edit_p50_ms_{n}']:.1f} ms; "
        f"first chunk +{figures[f'first_chunk_added_ms_{n}']:.1f} ms")  # fmt: skip


async def _plain(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({})


async def _first_chunk_added(
    client: TestClient[Any, Any], headers: dict[str, str], session: aiohttp.ClientSession, fake: FakeModelServer,
    chat: list[dict[str, str]], story: str,
) -> float:  # fmt: skip
    """A swipe (the same chat again) streamed: its first chunk through the proxy, less straight from the fake."""
    body = orjson.dumps({"model": "fake-model", "messages": [*_opening(), *chat[:-1]], "stream": True, "user": story})
    started = time.perf_counter()
    sent = {**headers, "Content-Type": "application/json"}
    async with client.post("/v1/chat/completions", data=body, headers=sent) as response:
        await response.content.readline()
        through = time.perf_counter() - started
        await response.read()
    started = time.perf_counter()
    async with session.post(f"{fake.url}/chat/completions", json={**fake.requests[-1], "stream": True}) as direct:
        await direct.content.readline()
        straight = time.perf_counter() - started
        await direct.read()
    return max(through - straight, 0.0)


def main() -> None:
    args = parse_args(__doc__)
    started = time.perf_counter()
    figures = asyncio.run(main_async(sized(args, FULL, QUICK, SMOKE)))
    figures["quick"] = int(args.quick)
    figures["smoke"] = int(args.smoke)
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)


if __name__ == "__main__":
    main()
