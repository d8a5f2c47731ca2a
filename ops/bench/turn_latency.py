"""A bring-your-own turn over HTTP at 1k, 10k, 30k and 100k turns of history, one client at a time.

    python ops/bench/turn_latency.py [--quick | --smoke] [--sizes 1000,10000,30000,100000] [--turns 300] [--profile]

For each size: a story built directly with `Changji` (compacted as it grew, with branches: `_common`),
its read models caught up, `changji serve` on it (CHANGJI_EMBEDDER=none: recall by its two BM25
rankings), the story's jobs settled and its recall index built; then one client (aiohttp, a
separate process) plays `--turns` turns the way a front end does — POST the user's words, GET the
context at them, POST the reply — after 20 warm-up turns. A turn's time is the three requests' wall
time on loopback; the sizes are run one after the other in one run.

Figures: `turn_p50_ms_<size>`, `turn_p99_ms_<size>`, the per-request medians, `context_kb_<size>`,
`server_rss_mb_<size>` (resident memory after the turns), `startup_s_<size>` (process start to
healthy), `ready_s_<size>` (healthy to jobs settled and the recall index built), and
`turn_p50_ratio` / `turn_p99_ratio`: the largest size over the smallest (goal ≤ 1.3).
--quick: 1k and 10k, 100 turns; --smoke: 20, 30, 40 and 50 turns under the full run's names, 3 turns
after 2 warm-up ones (`FIGURES`: the keys of the full run). `--profile`: py-spy samples the thread
holding the GIL in each server while the client plays (as `http_load.py --profile` does), summarized on
stderr per size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import emit, figure_keys, log, median_ms, parse_args, percentile, sized, texts
from _serving import build_variant, free_port, py_spy, rss_mb, stop, wait_healthy, wait_settled
from http_load import summarize_pyspy

FULL: dict[str, Any] = {"sizes": (1_000, 10_000, 30_000, 100_000), "turns": 300, "warmup": 20}
QUICK: dict[str, Any] = {"sizes": (1_000, 10_000), "turns": 100, "warmup": 20}
NAMES = ("1k", "10k", "30k", "100k")  # the full run's sizes, as its keys name them
SMOKE: dict[str, Any] = {"sizes": (20, 30, 40, 50), "names": NAMES, "turns": 3, "warmup": 2}
KINDS = ("append_user", "context", "append_reply")
FIGURES = figure_keys(
    "turn_p50_ms_{n}", "turn_p99_ms_{n}", "{kind}_p50_ms_{n}", "context_kb_{n}", "server_rss_mb_{n}", "startup_s_{n}",
    "ready_s_{n}", "turn_p50_ratio", "turn_p99_ratio", "turns", "quick", "smoke", "bench_s", n=NAMES, kind=KINDS,
)  # fmt: skip


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", help="story sizes in turns, comma-separated")
    parser.add_argument("--turns", type=int, help="measured turns per size")
    parser.add_argument("--drive", metavar="CONFIG_JSON", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help="profile each server under py-spy while it serves")


async def drive(config: dict[str, Any]) -> dict[str, Any]:
    """One client's turns; the wall time of each and of each request."""
    import aiohttp

    pool = texts()
    base, story_id = config["base"], config["story_id"]
    nodes, context = f"{base}/v1/stories/{story_id}/nodes", f"{base}/v1/stories/{story_id}/context"
    out: dict[str, Any] = {"turn": [], "context_bytes": 0, **{kind: [] for kind in KINDS}}
    clock = time.perf_counter
    headers = {"Authorization": f"Bearer {config['key']}"}
    async with aiohttp.ClientSession(headers=headers) as session:

        async def call(method: str, url: str, **kw: Any) -> tuple[float, bytes]:
            t0 = clock()
            async with session.request(method, url, **kw) as response:
                data = await response.read()
                if not 200 <= response.status < 300:
                    raise RuntimeError(f"{method} {url}: HTTP {response.status} {data[:300]!r}")
            return clock() - t0, data

        tip = config["tip"]
        for i in range(config["warmup"] + config["turns"]):
            user_text, reply_text = pool.pair(50_000 + i)
            t_user, raw = await call("POST", nodes, json={"kind": "user", "text": user_text, "parent_id": tip})
            words = json.loads(raw)["node"]["id"]
            t_context, body = await call("GET", context, params={"at": words})
            t_reply, raw = await call("POST", nodes, json={"kind": "reply", "text": reply_text, "parent_id": words})
            tip = json.loads(raw)["node"]["id"]
            if i >= config["warmup"]:
                out["turn"].append(t_user + t_context + t_reply)
                for kind, seconds in zip(KINDS, (t_user, t_context, t_reply), strict=True):
                    out[kind].append(seconds)
                out["context_bytes"] = len(body)
    return out


def wait_indexed(base: str, key: str, story_id: str, timeout: float = 600.0) -> None:
    """Until the story's recall index holds its archive (built, not behind)."""
    request = urllib.request.Request(f"{base}/v1/stories/{story_id}/index", headers={"Authorization": f"Bearer {key}"})
    context = urllib.request.Request(
        f"{base}/v1/stories/{story_id}/context", headers={"Authorization": f"Bearer {key}"}
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(context, timeout=60):  # a context asks for the index
            pass
        with urllib.request.urlopen(request, timeout=10) as response:
            state = json.loads(response.read())
        if state["passages"] and not state["behind"] and not state["building"]:
            return
        time.sleep(1.0)
    raise RuntimeError(f"the recall index was not built within {timeout:.0f}s")


def size_name(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def measure(size: int, tmp: Path, turns: int, warmup: int, spy: str | None = None) -> dict[str, Any]:
    data_dir = tmp / f"story-{size}"
    story = build_variant("compacted", data_dir, size)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    changji = str(Path(sys.executable).with_name("changji"))
    command = [changji, "--log-level", "WARNING", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    env = {**os.environ, "CHANGJI_EMBEDDER": "none"}
    log_path = tmp / f"server-{size}.log"
    with log_path.open("wb") as server_log:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=server_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        try:
            wait_healthy(base, proc, timeout=600)
            healthy = time.perf_counter()
            wait_settled(base, story["key"], story["story_id"], 600)
            wait_indexed(base, story["key"], story["story_id"])
            ready = time.perf_counter()
            log(f"[{size}] up in {healthy - started:.1f}s, settled and indexed {ready - healthy:.1f}s later; "
                f"{turns} turns…")  # fmt: skip
            config = {"base": base, "turns": turns, "warmup": warmup, **story}
            raw = tmp / f"py-spy-{size}.txt"
            profiler = None
            if spy:
                profiler = subprocess.Popen(
                    [spy, "record", "--pid", str(proc.pid), "--gil", "--format", "raw", "--rate", "200",
                     "--output", str(raw)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            try:
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--drive", json.dumps(config)],
                    stdout=subprocess.PIPE, timeout=1800, check=True,
                )  # fmt: skip
            finally:
                if profiler is not None:
                    profiler.send_signal(signal.SIGINT)  # (py-spy writes its samples as it stops)
                    try:
                        profiler.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        profiler.kill()
            result: dict[str, Any] = json.loads(out.stdout.decode().strip().splitlines()[-1])
            if profiler is not None and raw.exists():
                summarize_pyspy(raw, str(size))
            result["rss_mb"] = rss_mb(proc.pid)
            result["startup_s"], result["ready_s"] = healthy - started, ready - healthy
        except BaseException:
            log(log_path.read_text(errors="replace")[-3000:])
            raise
        finally:
            stop(proc)
    return result


def main() -> None:
    args = parse_args(__doc__, _extra)
    if args.drive:
        print(json.dumps(asyncio.run(drive(json.loads(args.drive)))), flush=True)
        return
    plan = sized(args, FULL, QUICK, SMOKE)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(plan["sizes"])
    names = list(plan["names"]) if "names" in plan and not args.sizes else [size_name(s) for s in sizes]
    turns = args.turns or plan["turns"]
    figures: dict[str, Any] = {"turns": turns}
    spy = py_spy() if args.profile else None
    if args.profile and spy is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy, or set $PY_SPY)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="changji-bench-latency-") as tmp:
        for size, name in zip(sizes, names, strict=True):
            result = measure(size, Path(tmp), turns, plan["warmup"], spy)
            figures[f"turn_p50_ms_{name}"] = median_ms(result["turn"])
            figures[f"turn_p99_ms_{name}"] = percentile(result["turn"], 99) * 1000
            for kind in KINDS:
                figures[f"{kind}_p50_ms_{name}"] = median_ms(result[kind])
            figures[f"context_kb_{name}"] = result["context_bytes"] / 1024
            figures[f"server_rss_mb_{name}"] = result["rss_mb"]
            figures[f"startup_s_{name}"] = result["startup_s"]
            figures[f"ready_s_{name}"] = result["ready_s"]
            log(f"[{size}] turn p50 {figures[f'turn_p50_ms_{name}']:.2f} ms, p99 {figures[f'turn_p99_ms_{name}']:.2f} ms, "
                f"RSS {result['rss_mb']:.0f} MB")  # fmt: skip
    figures["turn_p50_ratio"] = figures[f"turn_p50_ms_{names[-1]}"] / figures[f"turn_p50_ms_{names[0]}"]
    figures["turn_p99_ratio"] = figures[f"turn_p99_ms_{names[-1]}"] / figures[f"turn_p99_ms_{names[0]}"]
    figures["quick"] = bool(args.quick)
    figures["smoke"] = args.smoke
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)


if __name__ == "__main__":
    main()
