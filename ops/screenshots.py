"""Screenshots of the web page, one PNG per view, for the docs.

    python ops/screenshots.py [--out docs/screenshots] [--lang en|zh]

Starts a fake OpenAI-compatible main model (`providers.fake_server`, in a thread) and `changji serve` on a
free loopback port with a key of its own (a data dir in a temporary directory, removed at the end), builds
one story long enough to show what the views are for — turns packed into episodes and folded into a digest
(the offline summarizer, through POST /v1/stories/{id}/compact), recall, a scene set by PATCH
/v1/stories/{id}/scene, a swipe, a branch and a save, engine turns with their costs, the card's memory with
a handbook item — then opens each view in Debian's chromium (Playwright) at 1280×800 and writes
home, play, tree, context, scene, memory and jobs .png. Fails on any console error of the page.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the package is installed editable; this only helps a bare checkout
    sys.path.append(str(REPO))

from providers.fake_server import FakeModelServer, Step, Text, ToolCalls  # noqa: E402

CHANGJI = str(Path(sys.executable).parent / "changji")
WIDTH, HEIGHT = 1280, 800
VIEWS = ("home", "play", "tree", "context", "scene", "memory", "jobs")

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "沈砚",
        "description": "沈砚，三十岁，守着北岬灯塔的人。话少，手稳，记得每一艘经过的船。",
        "personality": "沉静、固执、心软",
        "scenario": "雾季的北岬，渡船停航，灯塔的灯油快用完了。",
        "first_mes": "门被风撞开。沈砚抬起头，手里的灯罩还没擦完：“这种天气，你是怎么上岬角来的？”",
        "mes_example": "",
        "alternate_greetings": ["灯塔的楼梯吱呀作响，沈砚在顶层等你。"],
        "tags": ["灯塔", "悬疑"],
    },
}

TURNS = [
    (
        "灯塔的灯还亮着吗？渡船什么时候来？码头上的人都在等消息。",
        "亮着，可油快用完了。渡船要等雾散了才来，少说还得三天。",
    ),
    ("那我们去仓库找找有没有备用的灯油吧。", "仓库的门锁锈死了，沈砚用撬棍把它撬开，里面堆着旧渔网和几只空油桶。"),
    ("渔网下面是什么？好像压着一个木箱。", "木箱里是一本航海日志，最后一页写着：北面的礁石下有沉船，船名被水泡花了。"),
    ("日志是谁的？封皮上有名字吗？", "封皮上烫着两个字：青鸟。沈砚的手顿了一下，说这是他父亲那条船的名字。"),
    ("你父亲的船？后来怎么了？", "二十年前的雾季，青鸟号出海去接一批药，再也没有回来。镇上说是撞了礁。"),
    ("我们今晚就去北面的礁石看看。", "夜里起了风，两人提着马灯沿着海岸往北走，浪一下一下拍在礁石上。"),
    ("前面有亮光，是不是有人？", "是一盏挂在礁石上的旧渔灯，灯罩上缠着一截红绳，像是有人故意留下的。"),
    ("红绳是什么意思？镇上有这个习俗吗？", "沈砚说镇上的渔家出海前会在灯上系红绳，保佑平安回来。这盏灯是新系的。"),
    ("也就是说最近有人来过这里。", "沙滩上有一串脚印，往礁石后面的岩洞去了，脚印很小，像是个孩子。"),
    ("我们跟着脚印去岩洞。", "岩洞里很潮，洞壁上刻着许多道划痕，像是有人在数日子。最深处放着一只铁皮盒。"),
    ("打开铁皮盒看看。", "盒子里是一沓信，收信人都是沈砚，落款是他父亲，日期在青鸟号出事之后。"),
    ("信上说了什么？", "第一封只有一句话：我还活着，别告诉你母亲。字迹被海水泡过，却还认得出来。"),
    ("你父亲还活着？那他为什么不回来？", "沈砚把信一封封摊开，后面的信越写越短，最后一封提到了北岬灯塔和一个约定。"),
    ("什么约定？", "信上写着：等灯塔的灯灭了，我就回来接你。沈砚抬头望向灯塔，灯光在雾里一闪一闪。"),
    ("所以灯油快用完不是巧合？", "沈砚沉默了很久，说这三年灯油一直被人偷偷换成了掺水的，他一直以为是镇上的人贪便宜。"),
    ("是谁换的灯油？", "账本上每次送油的都是同一个名字：顾川，渡口的船夫，也是当年青鸟号唯一活下来的水手。"),
    ("我们去渡口找顾川。", "渡口的小屋里没有人，炉子还温着，桌上摊着一张北岬的海图，礁石那里画了个圈。"),
    ("海图上的圈是什么意思？", "圈旁写着一个日期，就是明天。沈砚说明天是他父亲出海那天，整整二十年。"),
    ("那明天我们守在礁石那里。", "天亮前雾更浓了。两人躲在礁石后面，远处传来一阵桨声，一条小船慢慢靠了过来。"),
    ("船上是谁？", "船头站着一个佝偻的老人，手里提着一盏系着红绳的渔灯。沈砚握紧了拳头：那是顾川。"),
    ("先别出声，看他要做什么。", "顾川把渔灯挂在礁石上，对着海面说了一句：老沈，我把灯给你点上了，孩子长大了。"),
    ("他在跟谁说话？", "海面上什么也没有，只有雾。沈砚从礁石后走出来，顾川回过头，手里的灯晃了一下。"),
]
ASKED = "仓库木箱里那本青鸟号的航海日志，最后一页到底写了什么？"
ENGINE = ["顾川，我父亲到底在哪里？", "那灯塔的灯，还要不要点？"]


# --- the fake main model and `changji serve` --------------------------------------------------------


class Writer:
    """A main model for engine turns: a reply written in one `draft_write`, streamed in pieces, then sealed."""

    REPLIES = (
        "顾川沉默了很久，把渔灯递给沈砚：“他在青鸟号沉下去的那片海里。每年今天，我替他点一盏灯。”",
        "沈砚想起仓库木箱里那本航海日志，最后一页写着北面的礁石下有沉船。他把灯举高：“点，从今天起，我自己来点。”",
    )

    def __init__(self) -> None:
        self.written = 0

    def __call__(self, body: Mapping[str, Any]) -> Step:
        messages = body.get("messages") or []
        if not body.get("tools"):
            return Text("（离线模型）好的。")
        if messages and messages[-1].get("role") == "tool":
            return ToolCalls(("draft_seal", {"version": 1}))
        reply = self.REPLIES[self.written % len(self.REPLIES)]
        self.written += 1
        return ToolCalls(("draft_write", {"version": 0, "content": reply}), chunk_delay=0.02)


@contextmanager
def fake_model() -> Iterator[FakeModelServer]:
    """The fake model served by an event loop of its own thread (Playwright's sync API wants none here)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-model", daemon=True)
    thread.start()
    server = FakeModelServer(Writer())
    asyncio.run_coroutine_threadsafe(server.__aenter__(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Api:
    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key

    def __call__(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"{method} {path} → {error.code}: {error.read()[:500]!r}") from None


@contextmanager
def serving(data_dir: Path, env: Mapping[str, str]) -> Iterator[Api]:
    """`changji serve` on a free loopback port with a new key, until the block ends."""
    environ = {**os.environ, **env}
    made = subprocess.run(
        [CHANGJI, "keys", "create", "--data-dir", str(data_dir)], capture_output=True, text=True, env=environ
    )
    if made.returncode:
        raise RuntimeError(f"changji keys create failed: {made.stderr}")
    key = made.stdout.strip().splitlines()[0]
    port, log = free_port(), data_dir.parent / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [CHANGJI, "serve", "--data-dir", str(data_dir), "--port", str(port)], stdout=out, stderr=out, env=environ
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"changji serve did not start:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.05)
        yield Api(base, key)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- the story the views show -----------------------------------------------------------------------------


def build(api: Api) -> dict[str, Any]:
    """A card and a story of it: turns summarized into episodes and a digest, a branch, a swipe, a save, a
    scene, engine turns, the card's memory with a handbook item. The story as GET /v1/stories/{id} answers."""
    card = api("POST", "/v1/cards", {"card": CARD["data"]})
    settings = {"keep_turns": 2, "fill_window": False, "episodes_kept": 1, "recall_k": 6}
    story = api("POST", "/v1/stories", {"card_id": card["id"], "title": "北岬灯塔", "settings": settings})
    sid = story["id"]
    nodes: list[dict[str, Any]] = []
    for n, (user, reply) in enumerate(TURNS, start=1):
        nodes.append(api("POST", f"/v1/stories/{sid}/nodes", {"kind": "user", "text": user})["node"])
        nodes.append(api("POST", f"/v1/stories/{sid}/nodes", {"kind": "reply", "text": reply})["node"])
        compact(api, sid)  # (the offline summarizer: an episode once 500 characters wait, folded past one)
        if n == 8:
            api("POST", f"/v1/stories/{sid}/saves", {"name": "发现红绳渔灯"})
    tip = nodes[-1]["id"]

    # a branch: back to turn 6's reply, another way from there, then back to the main line
    api("POST", f"/v1/stories/{sid}/checkout", {"node_id": nodes[11]["id"]})
    api("POST", f"/v1/stories/{sid}/nodes", {"kind": "user", "text": "今晚风太大，我们明早再去礁石。"})
    api("POST", f"/v1/stories/{sid}/nodes", {"kind": "reply", "text": "沈砚点点头，把马灯挂回门后，雾一夜没散。"})
    api("POST", f"/v1/stories/{sid}/checkout", {"node_id": tip})

    for words in ENGINE:  # engine turns (their costs show in the jobs view), then a swipe of the last
        api("POST", f"/v1/stories/{sid}/turns", {"text": words})
        compact(api, sid)
    leaf = api("GET", f"/v1/stories/{sid}")["leaf_id"]
    user_id = api("GET", f"/v1/nodes/{leaf}")["parent_id"]
    api("POST", f"/v1/stories/{sid}/regenerate", {"user_id": user_id})
    api("POST", f"/v1/stories/{sid}/checkout", {"node_id": leaf})
    api("POST", f"/v1/nodes/{nodes[7]['id']}/star")

    scene = {
        "time": "雾季，第四天黎明前",
        "location": "北岬礁石",
        "characters": {"沈砚": {"at": "礁石后", "status": "握紧拳头"}, "顾川": {"at": "小船上", "status": "提着渔灯"}},
        "inventory": ["马灯", "青鸟号航海日志", "父亲的信"],
        "plot_threads": ["青鸟号为何沉没", "灯油被谁换成了掺水的", "父亲与顾川的约定"],
    }
    api("PATCH", f"/v1/stories/{sid}/scene", {"patch": scene})

    memory = api("POST", f"/v1/cards/{card['id']}/memory/sync")["memory"]
    tag = f"[局:{sid.replace('-', '')[:8]}]"
    facts = f"\n# 世界既定事实（跨局）\n- 青鸟号二十年前在北岬礁石沉没 {tag}\n- 顾川是青鸟号唯一的幸存者 {tag}\n"
    api("PUT", f"/v1/cards/{card['id']}/memory/handbook", {"text": memory["handbook"]["text"] + facts})
    settle(api, sid)
    story = api("GET", f"/v1/stories/{sid}")
    return dict(story)


def compact(api: Api, story_id: str) -> bool:
    """Compact now, if there is enough to (an answer of 422: not yet)."""
    try:
        api("POST", f"/v1/stories/{story_id}/compact", {})
    except RuntimeError as refused:
        if "→ 422" in str(refused):
            return False
        raise
    return True


def settle(api: Api, story_id: str, timeout: float = 30.0) -> None:
    """Wait until the story's background work is done (the jobs view shows it settled) and its recall index
    has caught up (a context asks for it to be brought up to date)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        api("GET", f"/v1/stories/{story_id}/context")
        index = api("GET", f"/v1/stories/{story_id}/index")
        if api("GET", f"/v1/stories/{story_id}/jobs").get("settled") and not index["behind"]:
            return
        time.sleep(0.3)
    print(f"the story's work did not settle within {timeout:.0f} s", file=sys.stderr)


# --- the browser ----------------------------------------------------------------------------------------


def shoot(api: Api, story: dict[str, Any], out: Path, lang: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium is missing (apt-get install chromium)")
    errors: list[str] = []
    written: list[Path] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"] if os.geteuid() == 0 else [])
        context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale="en-US", color_scheme="light")
        context.add_init_script(
            f"sessionStorage.setItem('changji.key', {json.dumps(api.key)});"
            f"localStorage.setItem('changji.lang', {json.dumps(lang)});"
        )
        page = context.new_page()
        page.on("console", lambda m: errors.append(f"console.error: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
        sid = story["id"]
        places = {"home": "#/", **{view: f"#/stories/{sid}/{view}" for view in VIEWS[1:]}}
        ready = {
            "home": "stories",
            "play": "messages",
            "tree": "tree",
            "context": "context",
            "scene": "scene",
            "memory": "memory",
            "jobs": "jobs",
        }
        for view in VIEWS:
            if view == "context":  # the user's next words, typed but not answered: the context they would be sent
                api("POST", f"/v1/stories/{sid}/nodes", {"kind": "user", "text": ASKED})  # with (recall, the scene)
            page.goto(f"{api.base}/{places[view]}")
            page.get_by_test_id(ready[view]).first.wait_for()
            page.wait_for_load_state("networkidle")
            arrange(page, view)
            path = out / f"{view}.png"
            page.screenshot(path=str(path))
            written.append(path)
        context.close()
        browser.close()
    if errors:
        raise SystemExit("the page logged errors:\n" + "\n".join(errors))
    return written


def arrange(page: Any, view: str) -> None:
    """What each view shows opened: the recall and episode blocks of the context, the tree's branch, an item's
    sources."""
    if view == "context":
        for what in ("recall",):
            block = page.locator(f"[data-testid=context-block][data-what={what}]")
            if block.count():
                block.first.get_by_role("button").first.click()
    elif view == "tree":
        stubs = page.get_by_role("button", name="Expand the branch", exact=False)
        if stubs.count():
            stubs.first.click()
    elif view == "memory":
        sources = page.get_by_test_id("memory-item-sources")
        if sources.count():
            sources.first.click()
            page.get_by_test_id("memory-audit").first.wait_for()
    elif view == "play":
        page.get_by_test_id("composer-text").fill("顾川，你愿意跟我回灯塔吗？")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(200)  # (fonts and the last layout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="changji-screenshots-") as tmp, fake_model() as model:
        env = {"CHANGJI_MAIN_BASE_URL": model.url, "CHANGJI_MAIN_MODEL": "fake-main", "CHANGJI_EMBEDDER": "none"}
        with serving(Path(tmp) / "data", env) as api:
            story = build(api)
            written = shoot(api, story, args.out, args.lang)
    for path in written:
        print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    print(f"{len(written)} screenshots in {time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
