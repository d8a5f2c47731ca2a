"""Browser tests of the web page: one real `changji serve` on loopback for all of them, its main model a fake
OpenAI-compatible server that writes each reply in engine mode a piece at a time (so a streamed reply is seen
growing), and Debian's chromium driven by Playwright's sync API. Every test gets a fresh page, signed in by
the key in session storage (never in a URL), that fails the test on any console error or uncaught exception.

Without chromium the tests are skipped, unless CHANGJI_REQUIRE_BROWSER=1 (CI): then they fail."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Playwright, sync_playwright

from providers.fake_server import FakeModelServer, Step, Text, ToolCalls
from tests.chromium import require_chromium
from tests.processes import Server, new_key, serving

KEY_ITEM = "changji.key"  # where the page keeps the key (api.js)
WIDTH, HEIGHT = 1280, 800
TIMEOUT_MS = 8_000  # what a locator waits at most: the slowest step is an engine turn of about 1.5 s
ASKING = "【选】"  # user words with this mark get a decision card before their reply
PIECE = 0.1  # seconds between a streamed reply's pieces, and before each of its later rounds


# --- the fake main model: a reply in three rounds (write, append, seal), each streamed ----------------


def said(body: Mapping[str, Any]) -> str:
    """The user's own words in a chat request (they come last in the last user message)."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return users[-1]["content"].strip().split("\n\n")[-1][:40] if users else ""


class PiecewiseWriter:
    """A main model that writes each reply through the draft tools in three rounds: `draft_write` of its first
    sentence, `draft_append` of a second one, then `draft_seal`, each after a short pause and streamed in chunks.
    Every reply is numbered (「第N稿」), so two replies to the same words (a swipe) differ. Words marked with
    ASKING are first answered by a decision card (`ask`), then by a reply that quotes the user's answer."""

    FIRST = "（第{n}稿）我听见你说：「{said}」。"
    SECOND = "风从门缝里钻进来，灯还亮着。"

    def __init__(self, piece: float = PIECE) -> None:
        self.piece = piece
        self.drafts = itertools.count(1)

    def __call__(self, body: Mapping[str, Any]) -> Step:
        messages = body.get("messages") or []
        if not body.get("tools"):  # (a request that is not a turn: answer plainly)
            return Text(f"（离线模型）{said(body)}")
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        rounds = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "assistant" and m.get("tool_calls"))
        if ASKING in said(body):  # a decision card first, then the reply the answer leads to
            if rounds == 0:
                return ToolCalls(("ask", {"question": "走哪条路？", "options": ["海边", "山路"]}), delay=self.piece)
            if rounds == 1:
                answered = str(messages[-1].get("content") or "")
                return ToolCalls(("draft_write", {"version": 0, "content": f"好，依你：{answered[:60]}"}))
            return ToolCalls(("draft_seal", {"version": 1}))
        if rounds == 0:
            first = self.FIRST.format(n=next(self.drafts), said=said(body))
            return ToolCalls(("draft_write", {"version": 0, "content": first}), chunk_delay=self.piece)
        if rounds == 1:
            second = ("draft_append", {"version": 1, "content": self.SECOND})
            return ToolCalls(second, delay=self.piece, chunk_delay=self.piece)
        return ToolCalls(("draft_seal", {"version": rounds}), delay=self.piece)


class FakeModelThread:
    """A FakeModelServer served by an event loop of its own thread, so the (sync) browser tests never run
    inside an asyncio loop."""

    def __init__(self, fallback: PiecewiseWriter) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake-model", daemon=True)
        self.server = FakeModelServer(fallback)

    def __enter__(self) -> FakeModelServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.__aenter__(), self.loop).result(10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.__aexit__(None, None, None), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


# --- the service ---------------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def fake_model() -> Iterator[FakeModelServer]:
    with FakeModelThread(PiecewiseWriter()) as server:
        yield server


@pytest.fixture(scope="package")
def server(browser: Browser, fake_model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`changji serve` on loopback, engine mode on the fake model, no embedder (recall by words alone)."""
    data_dir = tmp_path_factory.mktemp("browser") / "data"
    env = {"CHANGJI_MAIN_BASE_URL": fake_model.url, "CHANGJI_MAIN_MODEL": "fake-main", "CHANGJI_EMBEDDER": "none"}
    key = new_key(data_dir, env=env)
    with serving(data_dir, key, env=env) as running:
        yield running


# --- the browser -----------------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    require_chromium()
    driver = sync_playwright().start()
    yield driver
    driver.stop()


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    launched = playwright.chromium.launch(executable_path=require_chromium(), args=args)
    yield launched
    launched.close()


@dataclass
class Console:
    """What the page said at the level of errors: console.error messages and uncaught exceptions. A test that
    provokes an error on purpose (a refused key shows up as a failed load of 401) allows it by a fragment."""

    errors: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console.error: {message.text} ({message.location.get('url', '')})")

    def on_error(self, error: Exception) -> None:
        self.errors.append(f"uncaught: {error}")

    def allow(self, pattern: str) -> None:
        self.allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]


@pytest.fixture
def console() -> Console:
    return Console()


def open_page(browser: Browser, console: Console, key: str | None, **context: Any) -> tuple[BrowserContext, Page]:
    """A fresh browser context and its page, listened to by `console`; signed in with `key` when given (put in
    session storage before the page's scripts run), in English unless the test switches."""
    made = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale="en-US", **context)
    made.set_default_timeout(TIMEOUT_MS)
    script = "if (!localStorage.getItem('changji.lang')) localStorage.setItem('changji.lang', 'en');"
    if key is not None:
        script += f"sessionStorage.setItem({json.dumps(KEY_ITEM)}, {json.dumps(key)});"
    made.add_init_script(script)
    page = made.new_page()
    page.on("console", console.on_console)
    page.on("pageerror", console.on_error)
    return made, page


@pytest.fixture
def page(browser: Browser, server: Server, console: Console) -> Iterator[Page]:
    """A signed-in page on the server (not yet navigated: `go(page, server, "#/…")`)."""
    made, opened = open_page(browser, console, server.key)
    yield opened
    made.close()
    assert not console.unexpected(), "\n".join(console.unexpected())


@pytest.fixture
def signed_out(browser: Browser, server: Server, console: Console) -> Iterator[Page]:
    made, opened = open_page(browser, console, None)
    yield opened
    made.close()
    assert not console.unexpected(), "\n".join(console.unexpected())


# --- helpers the tests share -----------------------------------------------------------------------------


def go(page: Page, server: Server, place: str = "#/") -> None:
    """Open the page at a place (`#/stories/<id>/play`)."""
    page.goto(f"{server.base}/{place}")


LINES = [
    ("灯塔的灯还亮着吗？渡船什么时候来？码头上的人都在等消息。", "亮着，油快用完了。渡船三天后才来，要等雾散了。"),
    ("那我们去仓库找找有没有备用的灯油吧。", "仓库的门锁锈死了，沈砚用撬棍把它撬开，里面堆着旧渔网。"),
    ("渔网下面是什么？好像有个木箱。", "木箱里是一本航海日志，最后一页写着：北面的礁石下有沉船。"),
    ("我们今晚就去北面的礁石看看。", "夜里起了风，两人提着灯沿着海岸往北走，浪拍在礁石上。"),
    ("沉船还在吗？", "沉船的桅杆露出水面，船身上刻着一个名字：青鸟号。"),
    ("青鸟号是谁的船？", "沈砚说那是他父亲二十年前出海时开的船，再也没有回来。"),
]


def new_story(server: Server, turns: int = 0, name: str = "沈砚", **settings: Any) -> dict[str, Any]:
    """A card and a story of it with `turns` turns appended as written (no model), through the API."""
    card = server.call(
        "POST", "/v1/cards", {"card": {"name": name, "first_mes": "门被风撞开。", "description": "守灯塔的人。"}}
    )
    story: dict[str, Any] = server.call("POST", "/v1/stories", {"card_id": card["id"], "settings": settings})
    for user, reply in (LINES * 4)[:turns]:
        server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": user})
        server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": reply})
    return story
