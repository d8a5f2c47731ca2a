"""The web page in a real browser: how soon a 10,000-turn story's tree is usable, and whether a long reply
streaming into the play view keeps the page's frames coming.

    python ops/bench/web_page.py [--quick | --smoke] [--loads 5] [--tokens 2000]

A story of 10k turns (--quick: 1k; --smoke: 50) with branches and swipes (`_common.build_story`: a
regenerated reply every 50 turns, a side branch every 500) is built directly with `Changji`, its read
models caught up and a key made (`_serving.build_variant`, compaction off); `changji serve` serves it
(CHANGJI_EMBEDDER=none) with its main model a fake OpenAI-compatible server in a process of its own (this
script with `--fake-model`), which answers each engine turn with a reply of `--tokens` pieces streamed
CHUNK_MS apart. Debian's chromium (/usr/bin/chromium, `--no-sandbox` as root) is driven headless by
Playwright's sync API, signed in by the key in session storage (put there before the page's scripts run,
never in a URL), at 1280×800.

Figures:
- `tree_interactive_ms`: the median over `--loads` fresh pages (each in a new browser context) of the time
  from navigating to `#/stories/<id>/tree` (the page's time origin) until a checkout button of the tree is
  in the document and enabled and the frame that shows it has been painted (a MutationObserver notes it, a
  requestAnimationFrame + setTimeout waits out the paint); `tree_interactive_max_ms` the slowest load and
  `tree_cold_interactive_ms` the first (the server's caches cold). Of the loads after the first (medians):
  `tree_view_ms` the tree view's own share, from the story's answer (when the page's shell mounts the view)
  to interactive; `tree_fetch_ms` from its first page of nodes asked to its last answered (5,000 a page,
  one after the other: each names the next); `tree_render_ms` from that last answer to interactive (the
  tree built and laid out). `tree_rows`: the rows the tree rendered (a collapsed run of single-child nodes
  is one row), `tree_nodes` the story's nodes.
- `tree_checkout_ms`: a click on the checkout button of the tree's first folded run until the tree marks
  the leaf there (the checkout, the story read again, the tree laid out again).
- `stream_longest_frame_ms`: while a reply of `stream_tokens` pieces streams into the play view, the longest
  gap between two requestAnimationFrame callbacks (16.7 ms when nothing is in the way);
  `stream_blocked_ms`: the sum over those gaps of what exceeds 50 ms (as Total Blocking Time counts long
  tasks); `stream_frames` and `stream_s` the frames seen and the streaming's duration (first piece shown to
  the reply sealed).
- `page_errors`: console errors and uncaught exceptions over the whole run (0 expected).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import emit, figure_keys, log, parse_args, sized, texts
from _serving import build_variant, free_port, stop, wait_healthy, wait_settled

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Page

FULL: dict[str, Any] = {"story_turns": 10_000, "loads": 5, "tokens": 2_000, "settle_limit": 600.0}
QUICK: dict[str, Any] = {"story_turns": 1_000, "loads": 3, "tokens": 2_000, "settle_limit": 120.0}
SMOKE: dict[str, Any] = {"story_turns": 50, "loads": 1, "tokens": 100, "settle_limit": 30.0}
CHUNK_MS = 5.0  # between the streamed reply's pieces: 200 pieces/s, a fast provider
WIDTH, HEIGHT = 1280, 800
LONG_FRAME_MS = 50.0  # a gap between frames past this counts as blocked (by its excess)
PAGE_TIMEOUT_MS = 60_000
FIGURES = figure_keys(
    "story_turns", "tree_nodes", "tree_rows", "tree_interactive_ms", "tree_interactive_max_ms",
    "tree_cold_interactive_ms", "tree_view_ms", "tree_fetch_ms", "tree_render_ms", "tree_checkout_ms", "stream_tokens", "stream_longest_frame_ms", "stream_blocked_ms",
    "stream_frames", "stream_s", "page_errors", "quick", "smoke", "bench_s",
)  # fmt: skip

# Notes (once) when a checkout button of the tree is first enabled in the document, after the frame that
# shows it: window.__treeReady = {ms, rows} (ms since the navigation started).
READY_SCRIPT = """
(() => {
  const seek = "[data-testid=tree] [data-testid=tree-checkout]:not([aria-disabled=true])";
  const seen = new MutationObserver(() => {
    if (!document.querySelector(seek)) return;
    seen.disconnect();
    requestAnimationFrame(() => setTimeout(() => {
      window.__treeReady = { ms: performance.now(), rows: document.querySelectorAll("[data-testid=tree-row]").length };
    }, 0));
  });
  const start = () => seen.observe(document.documentElement, { childList: true, subtree: true, attributes: true });
  if (document.documentElement) start(); else document.addEventListener("readystatechange", start, { once: true });
})();
"""

# Every requestAnimationFrame callback's time, and whether a reply was streaming at it.
FRAMES_SCRIPT = """
() => {
  window.__frames = [];
  window.__framing = true;
  const tick = (now) => {
    const live = document.querySelector("[data-testid=live-text]");
    window.__frames.push([now, live ? live.textContent.length : -1]);
    if (window.__framing) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}
"""


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loads", type=int, help="fresh page loads of the tree measured (default: 5; --quick 3)")
    parser.add_argument("--tokens", type=int, help="pieces of the streamed reply (default: 2000)")
    parser.add_argument(
        "--chromium",
        default=shutil.which("chromium") or "/usr/bin/chromium",
        help="the browser (default: Debian's chromium)",
    )
    parser.add_argument("--fake-model", metavar="PORT:TOKENS", help=argparse.SUPPRESS)  # the fake model's process


# --- the fake main model: one long reply per turn, streamed piece by piece -----------------------------------


def long_reply(tokens: int) -> list[str]:
    """`tokens` pieces of two characters (about a token each), cut from the bench's reply texts."""
    pool = texts()
    text = ""
    i = 0
    while len(text) < 2 * tokens:
        text += pool.pair(i)[1] + "\n\n" * (i % 3 == 2)
        i += 1
    return [text[k : k + 2] for k in range(0, 2 * tokens, 2)]


def serve_fake_model(port: int, tokens: int) -> None:
    from providers.fake_server import FakeModelServer, Step, Text

    pieces = long_reply(tokens)

    def answer(body: Any) -> Step:
        if body.get("tools"):  # an engine turn: the long reply as plain text (the turn ends with it)
            return Text(pieces, chunk_delay=CHUNK_MS / 1000, completion_tokens=tokens)
        return Text("（离线模型）好的。")

    async def run() -> None:
        async with FakeModelServer(answer, port=port):
            await asyncio.Event().wait()

    asyncio.run(run())


def wait_fake_model(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the fake model exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no fake model at {url} within {timeout:.0f}s")


# --- the browser -----------------------------------------------------------------------------------------


class Browsing:
    """Chromium under Playwright: fresh contexts signed in with the key; every console error counted."""

    def __init__(self, executable: str, key: str, base: str) -> None:
        from playwright.sync_api import sync_playwright

        self.base, self.key = base, key
        self.errors: list[str] = []
        self.driver = sync_playwright().start()
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        # chromium's singleton socket lives in TMPDIR and a socket path has at most 107 bytes: a deep
        # TMPDIR (a test's) makes it abort at start, so it gets a short one of its own
        self.scratch = tempfile.mkdtemp(prefix="cj-chromium-", dir="/tmp" if os.path.isdir("/tmp") else None)
        env = {**os.environ, "TMPDIR": self.scratch}
        self.browser = self.driver.chromium.launch(executable_path=executable, args=args, env=env)

    def page(self) -> Page:
        context = self.browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, locale="en-US")
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        context.add_init_script(
            "localStorage.setItem('changji.lang', 'en');"
            f"sessionStorage.setItem('changji.key', {json.dumps(self.key)});" + READY_SCRIPT
        )
        page = context.new_page()
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        return page

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console.error: {message.text}")

    def close(self) -> None:
        self.browser.close()
        self.driver.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


# When the page had the story (the tree view starts then) and its tree's pages (first asked, last answered), in
# ms since the navigation started, from the page's resource timings.
TIMINGS_SCRIPT = """
(story) => {
  const calls = performance.getEntriesByType("resource").filter((e) => e.name.includes(`/v1/stories/${story}`));
  const pages = calls.filter((e) => e.name.includes("/tree?"));
  const got = calls.find((e) => new URL(e.name).pathname === `/v1/stories/${story}`);
  return { story: got ? got.responseEnd : -1, first: pages.length ? pages[0].startTime : -1,
    last: pages.length ? Math.max(...pages.map((e) => e.responseEnd)) : -1, pages: pages.length };
}
"""


def load_tree(browsing: Browsing, story_id: str) -> tuple[dict[str, float], Page]:
    """One fresh page on the story's tree: its times (ms since the navigation started: `ready` interactive,
    `story` the story answered, `first`/`last` the tree's first page asked and last answered), rows, the page."""
    page = browsing.page()
    t0 = time.perf_counter()
    page.goto(f"{browsing.base}/#/stories/{story_id}/tree", wait_until="commit")
    ready = page.wait_for_function("() => window.__treeReady", timeout=PAGE_TIMEOUT_MS).json_value()
    outside = (time.perf_counter() - t0) * 1000
    times = {"ready": float(ready["ms"]), "rows": int(ready["rows"]), **page.evaluate(TIMINGS_SCRIPT, story_id)}
    log(f"  tree interactive at {times['ready']:.0f} ms ({outside:.0f} ms as Playwright saw it), {times['rows']} rows; "
        f"the story answered at {times['story']:.0f} ms, the tree's {times['pages']} pages from {times['first']:.0f} "
        f"to {times['last']:.0f} ms")  # fmt: skip
    return times, page


def checkout_from_tree(page: Page) -> float:
    """Click the first folded run's checkout (its last node); ms until the tree marks the leaf there."""
    button = page.locator("[data-testid=tree-row].tree-row-chain [data-testid=tree-checkout]").first
    if button.count() == 0:  # (a tiny story may fold nothing: any enabled checkout)
        button = page.locator("[data-testid=tree-checkout]:not([aria-disabled=true])").first
    label = button.get_attribute("aria-label") or ""
    before = page.locator("[data-testid=tree-leaf]").first.inner_text()
    t0 = time.perf_counter()
    button.click()
    page.wait_for_function(
        "(before) => { const leaf = document.querySelector('[data-testid=tree-leaf]');"
        " return leaf && leaf.innerText !== before; }",
        arg=before,
    )
    ms = (time.perf_counter() - t0) * 1000
    log(f"  checkout ({label}) shown in {ms:.0f} ms")
    return ms


def stream_reply(browsing: Browsing, story_id: str, tokens: int) -> dict[str, float]:
    """Send a turn from the play view and watch the frames while its reply streams in."""
    page = browsing.page()
    page.goto(f"{browsing.base}/#/stories/{story_id}/play")
    page.locator("[data-testid=composer-text]").fill("灯塔的灯还亮着吗？Tell me the whole story of the lamp.")
    page.wait_for_load_state("networkidle")  # (the path's swipes loaded: the page is idle before the turn)
    page.evaluate(FRAMES_SCRIPT)
    page.locator("[data-testid=composer-send]").click()
    page.wait_for_selector("[data-testid=live-text]")
    page.wait_for_selector("[data-testid=live-reply]", state="detached", timeout=max(PAGE_TIMEOUT_MS, tokens * 50))
    page.wait_for_timeout(200)
    frames: list[list[float]] = page.evaluate("() => { window.__framing = false; return window.__frames; }")
    page.context.close()
    shown = [i for i, (_, length) in enumerate(frames) if length > 0]
    if not shown:
        raise RuntimeError("no frame showed the streaming reply")
    first, last = shown[0], min(shown[-1] + 1, len(frames) - 1)  # (through the frame after the last piece)
    times = [frames[i][0] for i in range(first, last + 1)]
    gaps = [b - a for a, b in itertools.pairwise(times)] or [0.0]
    return {
        "stream_longest_frame_ms": max(gaps),
        "stream_blocked_ms": sum(max(0.0, g - LONG_FRAME_MS) for g in gaps),
        "stream_frames": len(times),
        "stream_s": (times[-1] - times[0]) / 1000,
        "stream_chars": frames[shown[-1]][1],
    }


# --- the run ---------------------------------------------------------------------------------------------


def reset_leaf(base: str, key: str, story_id: str, node_id: str) -> None:
    request = urllib.request.Request(
        f"{base}/v1/stories/{story_id}/checkout", data=json.dumps({"node_id": node_id}).encode(), method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30):
        pass


def count_nodes(base: str, key: str, story_id: str) -> int:
    total, cursor = 0, None
    while True:
        query = f"?limit=5000{f'&cursor={cursor}' if cursor else ''}"
        request = urllib.request.Request(
            f"{base}/v1/stories/{story_id}/tree{query}", headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            page = json.loads(response.read())
        total += len(page["nodes"])
        cursor = page["next_cursor"]
        if not cursor:
            return total


def measure(plan: dict[str, Any], args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    built = build_variant("raw", tmp / "data", plan["story_turns"])
    key, story_id, tip = built["key"], built["story_id"], built["tip"]
    fake_port, port = free_port(), free_port()
    fake_url, base = f"http://127.0.0.1:{fake_port}/v1", f"http://127.0.0.1:{port}"
    logs = [(tmp / name).open("wb") for name in ("fake-model.log", "server.log")]
    fake = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--fake-model", f"{fake_port}:{plan['tokens']}"],
        stdout=logs[0], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    changji = str(Path(sys.executable).with_name("changji"))
    env = {**os.environ, "CHANGJI_EMBEDDER": "none", "CHANGJI_MAIN_BASE_URL": fake_url, "CHANGJI_MAIN_MODEL": "fake"}
    server = subprocess.Popen(
        [changji, "--log-level", "WARNING", "serve", "--data-dir", str(tmp / "data"), "--port", str(port)],
        stdout=logs[1], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    browsing = None
    try:
        wait_fake_model(fake_url, fake)
        wait_healthy(base, server)
        log(f"server up on {base}; its jobs settled in {wait_settled(base, key, story_id, plan['settle_limit']):.1f}s")
        figures: dict[str, Any] = {"story_turns": plan["story_turns"], "tree_nodes": count_nodes(base, key, story_id)}
        browsing = Browsing(args.chromium, key, base)
        log(f"loading the tree of {figures['tree_nodes']:,} nodes {plan['loads']} times…")
        loads = []
        for _ in range(plan["loads"] - 1):
            times, page = load_tree(browsing, story_id)
            page.context.close()
            loads.append(times)
        times, page = load_tree(browsing, story_id)  # (the last one stays open for a checkout)
        loads.append(times)
        warm = loads[1:] or loads
        figures["tree_cold_interactive_ms"] = loads[0]["ready"]
        figures["tree_interactive_ms"] = statistics.median(t["ready"] for t in loads)
        figures["tree_interactive_max_ms"] = max(t["ready"] for t in loads)
        figures["tree_view_ms"] = statistics.median(t["ready"] - t["story"] for t in warm)
        figures["tree_fetch_ms"] = statistics.median(t["last"] - t["first"] for t in warm)
        figures["tree_render_ms"] = statistics.median(t["ready"] - t["last"] for t in warm)
        figures["tree_rows"] = times["rows"]
        figures["tree_checkout_ms"] = checkout_from_tree(page)
        page.context.close()
        reset_leaf(base, key, story_id, tip)
        log(f"streaming a reply of {plan['tokens']} pieces into the play view…")
        streamed = stream_reply(browsing, story_id, plan["tokens"])
        log(f"  {streamed.pop('stream_chars'):.0f} characters shown over {streamed['stream_s']:.1f}s, "
            f"{streamed['stream_frames']:.0f} frames, the longest {streamed['stream_longest_frame_ms']:.0f} ms, "
            f"{streamed['stream_blocked_ms']:.0f} ms blocked")  # fmt: skip
        figures.update(streamed, stream_tokens=plan["tokens"])
        for error in browsing.errors[:10]:
            log(f"page error: {error}")
        figures["page_errors"] = len(browsing.errors)
        return figures
    except BaseException:
        for handle in logs:
            handle.flush()
        log((tmp / "server.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        if browsing is not None:
            browsing.close()
        stop(server)
        stop(fake)
        for handle in logs:
            handle.close()


def main() -> None:
    args = parse_args(__doc__, _extra)
    if args.fake_model:
        port, _, tokens = args.fake_model.partition(":")
        serve_fake_model(int(port), int(tokens))
        return
    if not (os.access(args.chromium, os.X_OK) or shutil.which(args.chromium)):
        raise SystemExit(f"no browser at {args.chromium} (apt-get install chromium)")
    plan = dict(sized(args, FULL, QUICK, SMOKE))
    if args.loads:
        plan["loads"] = args.loads
    if args.tokens:
        plan["tokens"] = args.tokens
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="changji-bench-web-") as tmp:
        figures = measure(plan, args, Path(tmp))
    log(f"tree interactive in {figures['tree_interactive_ms']:.0f} ms (median of {plan['loads']}), "
        f"{figures['tree_rows']} rows for {figures['tree_nodes']:,} nodes")  # fmt: skip
    figures["quick"] = bool(args.quick)
    figures["smoke"] = args.smoke
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)


if __name__ == "__main__":
    main()
