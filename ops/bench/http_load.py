"""HTTP load: `changji serve` on loopback, 64 concurrent BYO clients on a 10k-turn story.

    python ops/bench/http_load.py [--quick] [--profile]

1. Builds one story of 10k turns (--quick: 1k) with branches directly with `Changji` in a temp data
   dir, catches the read models up (`ProjectionRunner`) and creates an API key for the story's tenant.
2. Starts `changji serve --data-dir D --port P` on 127.0.0.1 as a subprocess and waits for /healthz.
3. Drives it from a separate process (this script with `--drive`, an aiohttp client) with 64
   concurrent clients. Each turn: POST a user node with `parent_id` = the client's own tip (clients
   branch off the story's last reply, so they never contend for the leaf), POST a reply under it, GET
   `/v1/stories/{id}/context?at=<reply>`. Bounded by a turn count (3,000; --quick: 600) and a time limit.
4. Stops the server (SIGTERM, wait) and prints the figures: `turns_per_s`, `p50_ms`, `p99_ms`
   (per request, over all requests), `errors` (non-2xx or exceptions), `requests`, `duration_s`, plus
   per-kind latencies and the cold first context.

`--profile`: the same run with the server under `py-spy record` (found on PATH, in $PY_SPY, or
in /tmp/pyspy/bin; `PY_SPY=none` skips it), sampling the thread that holds the GIL; without py-spy the
server runs in this process under cProfile (every thread).
The top functions go to stderr. A profiled run's figures are slower than a plain one's.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import TENANT, build_story, emit, log, median_ms, parse_args, percentile, texts

FULL: dict[str, Any] = {"story_turns": 10_000, "turns": 3_000, "clients": 64, "time_limit": 120.0}
QUICK: dict[str, Any] = {"story_turns": 1_000, "turns": 600, "clients": 64, "time_limit": 30.0}
KINDS = ("append_user", "append_reply", "context")


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", action="store_true", help="profile the server while it serves the load")
    parser.add_argument("--drive", metavar="CONFIG_JSON", help=argparse.SUPPRESS)  # the client process


# --- the client process ---------------------------------------------------------------------------


async def drive(config: dict[str, Any]) -> dict[str, Any]:
    """Run the load; return raw latencies per kind, error count and the measured duration."""
    import aiohttp

    pool = texts()
    base, story_id = config["base"], config["story_id"]
    nodes_url = f"{base}/v1/stories/{story_id}/nodes"
    context_url = f"{base}/v1/stories/{story_id}/context"
    latencies: dict[str, list[float]] = {kind: [] for kind in KINDS}
    errors: collections.Counter[str] = collections.Counter()
    state = {"left": config["turns"], "done": 0}
    context_bytes: list[int] = []
    clock = time.perf_counter

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    headers = {"Authorization": f"Bearer {config['key']}"}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(headers=headers, connector=connector, timeout=timeout) as session:

        async def call(kind: str, method: str, url: str, **kw: Any) -> Any:
            t0 = clock()
            try:
                async with session.request(method, url, **kw) as response:
                    data = await response.read()
                    status = response.status
            except Exception as exc:  # a timeout or a dropped connection: an error without a latency
                errors[f"{kind}: {type(exc).__name__}"] += 1
                return None
            latencies[kind].append(clock() - t0)
            if kind == "context":
                context_bytes.append(len(data))
            if not 200 <= status < 300:
                errors[f"{kind}: HTTP {status} {data[:200]!r}"] += 1
                return None
            return json.loads(data)

        # the server's first context (cold aggregate and render caches), not part of the load
        t0 = clock()
        first = await session.get(context_url, params={"at": config["tip"]})
        await first.read()
        cold_ms = (clock() - t0) * 1000
        if first.status != 200:
            raise SystemExit(f"the first context failed: HTTP {first.status}")

        deadline = clock() + config["time_limit"]

        async def client(index: int) -> None:
            tip = config["tip"]
            while state["left"] > 0 and clock() < deadline:
                state["left"] -= 1
                user_text, reply_text = pool.next_pair()
                user = await call(
                    "append_user", "POST", nodes_url, json={"kind": "user", "text": user_text, "parent_id": tip}
                )
                if user is None:
                    continue
                reply = await call("append_reply", "POST", nodes_url,
                                   json={"kind": "reply", "text": reply_text, "parent_id": user["node"]["id"]})  # fmt: skip
                if reply is None:
                    continue
                tip = reply["node"]["id"]
                if await call("context", "GET", context_url, params={"at": tip}) is not None:
                    state["done"] += 1

        started, cpu = clock(), time.process_time()
        await asyncio.gather(*(client(i) for i in range(config["clients"])))
        duration, cpu = clock() - started, time.process_time() - cpu
    return {
        "latencies": latencies,
        "errors": dict(errors),
        "turns": state["done"],
        "duration_s": duration,
        "cold_context_ms": cold_ms,
        "timed_out": clock() >= deadline,
        "client_cpu_s": cpu,
        "context_kb": sum(context_bytes) / len(context_bytes) / 1024 if context_bytes else -1,
    }


# --- the server and the measurement -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(base: str, proc: subprocess.Popen[bytes] | None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no /healthz from {base} within {timeout:.0f}s")


def py_spy() -> str | None:
    """The py-spy executable ($PY_SPY, PATH, /tmp/pyspy/bin); PY_SPY=none forces the cProfile fallback."""
    if os.environ.get("PY_SPY", "").lower() == "none":
        return None
    for candidate in (os.environ.get("PY_SPY"), shutil.which("py-spy"), "/tmp/pyspy/bin/py-spy"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def children_of(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux /proc), 0 if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def stop(proc: subprocess.Popen[bytes], server_pid: int | None = None) -> None:
    """SIGTERM the server (aiohttp shuts down gracefully on it) and wait; kill if it hangs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(server_pid or proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        log("the server did not stop within 20s: killing it")
        if server_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


def run_driver(config: dict[str, Any]) -> dict[str, Any]:
    """The load, from a separate process (this script with --drive)."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--drive", json.dumps(config)],
        stdout=subprocess.PIPE,
        timeout=config["time_limit"] + 120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return result


def summarize_pyspy(raw: Path, top: int = 30) -> None:
    """Self and inclusive sample counts per function from py-spy's raw (collapsed) output."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [f.strip() for f in stack.split(";")]
        names = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].split("/")[-1] + ")" for f in frames]
        own[names[-1]] += n
        for name in set(names):
            inclusive[name] += n
    log(f"\n== server profile (py-spy, {total} samples of the thread holding the GIL) ==\n-- self --")
    for name, n in own.most_common(top):
        log(f"{100 * n / total:6.1f}%  {name}")
    log("-- inclusive --")
    for name, n in inclusive.most_common(top + 20):
        log(f"{100 * n / total:6.1f}%  {name}")


def serve_in_process_profiled(data_dir: Path, port: int, config: dict[str, Any]) -> dict[str, Any]:
    """Fallback profile without py-spy: the server in this process, cProfile on every thread."""
    import cProfile
    import pstats
    import threading

    from aiohttp import web

    from api.app import create_app
    from api.settings import Settings

    profiles: list[cProfile.Profile] = []

    def start_thread_profile(*_: Any) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()  # replaces this hook for the thread

    async def run() -> dict[str, Any]:
        app = create_app(Settings(data_dir=data_dir, port=port))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        main = cProfile.Profile()
        profiles.append(main)
        threading.setprofile(start_thread_profile)
        main.enable()
        try:
            return await asyncio.to_thread(run_driver, config)
        finally:
            main.disable()
            threading.setprofile(None)
            await runner.cleanup()

    result = asyncio.run(run())
    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        stats.add(profile)
    log("\n== server profile (cProfile, all threads) ==")
    stats.stream = sys.stderr  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumtime").print_stats(50)
    return result


def main() -> None:
    args = parse_args(__doc__, _extra)
    if args.drive:
        print(json.dumps(asyncio.run(drive(json.loads(args.drive)))), flush=True)
        return

    from api.settings import Settings
    from domain.application import Changji
    from projections.read_models.store import ReadModels
    from projections.runner import ProjectionRunner
    from storage.service_db import ServiceDB

    plan = QUICK if args.quick else FULL
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="changji-bench-http-") as tmp:
        data_dir = Path(tmp) / "data"
        settings = Settings(data_dir=data_dir)
        data_dir.mkdir(parents=True)
        app = Changji(env=settings.event_store_env())
        log(f"http bench ({'quick' if args.quick else 'full'}): building a {plan['story_turns']}-turn story…")
        built = build_story(app, plan["story_turns"], texts(), tenant=TENANT)
        store = ReadModels(settings.read_models_path)
        runner = ProjectionRunner(app, store)
        t0 = time.perf_counter()
        position = runner.catch_up()
        log(f"  read models caught up to {position:,} in {time.perf_counter() - t0:.1f}s")
        close = getattr(store, "close", None)
        close() if callable(close) else store.writer.conn.close()
        app.close()
        db = ServiceDB(settings.service_db_path)
        _, key = db.create_key(TENANT, "ops/bench/http_load.py")
        db.close()

        port = free_port()
        base = f"http://127.0.0.1:{port}"
        config = {
            "base": base, "key": key, "story_id": str(built.story_id), "tip": str(built.tip_id),
            "turns": plan["turns"], "clients": plan["clients"], "time_limit": plan["time_limit"],
        }  # fmt: skip
        spy = py_spy() if args.profile else None
        if args.profile and spy is None:
            log("py-spy not found: profiling the server in this process with cProfile")
            result = serve_in_process_profiled(data_dir, port, config)
        else:
            changji = str(Path(sys.executable).with_name("changji"))
            command = [changji, "--log-level", "WARNING", "serve", "--data-dir", str(data_dir), "--port", str(port)]
            raw = Path(tmp) / "py-spy.txt"
            if spy:
                command = [
                    spy,
                    "record",
                    "--gil",
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--output",
                    str(raw),
                    "--",
                    *command,
                ]
            server_log = (Path(tmp) / "server.log").open("wb")
            proc = subprocess.Popen(command, stdout=server_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            server_pid = 0  # under py-spy, the server is py-spy's child
            try:
                wait_healthy(base, proc)
                server_pid = (children_of(proc.pid) or [0])[0] if spy else 0
                server_cpu = cpu_seconds(server_pid or proc.pid)
                log(f"  server up on {base}; driving {plan['clients']} clients × {plan['turns']} turns "
                    f"(limit {plan['time_limit']:.0f}s) from a separate process…")  # fmt: skip
                result = run_driver(config)
                result["server_cpu_s"] = cpu_seconds(server_pid or proc.pid) - server_cpu
            except BaseException:
                server_log.flush()
                log((Path(tmp) / "server.log").read_text(errors="replace")[-3000:])
                raise
            finally:
                stop(proc, server_pid or None)
                server_log.close()
            if spy and raw.exists():
                summarize_pyspy(raw)

    latencies: dict[str, list[float]] = result["latencies"]
    every = [x for kind in KINDS for x in latencies[kind]]
    errors = sum(result["errors"].values())
    for message, count in sorted(result["errors"].items(), key=lambda kv: -kv[1])[:10]:
        log(f"  error ×{count}: {message}")
    figures: dict[str, Any] = {
        "turns_per_s": result["turns"] / result["duration_s"],
        "p50_ms": percentile(every, 50) * 1000,
        "p99_ms": percentile(every, 99) * 1000,
        "errors": errors,
        "requests": len(every) + sum(n for m, n in result["errors"].items() if "HTTP" not in m),
        "duration_s": result["duration_s"],
        "turns": result["turns"],
        "clients": plan["clients"],
        "story_turns": plan["story_turns"],
    }
    for kind in KINDS:
        figures[f"{kind}_p50_ms"] = median_ms(latencies[kind])
        figures[f"{kind}_p99_ms"] = percentile(latencies[kind], 99) * 1000
    figures["max_ms"] = max(every) * 1000 if every else -1
    figures["cold_context_ms"] = result["cold_context_ms"]
    figures["context_response_kb"] = result["context_kb"]
    # cores busy during the load (2 on this machine): the server is one process, one GIL
    figures["server_cpu_cores"] = result.get("server_cpu_s", 0.0) / result["duration_s"]
    figures["client_cpu_cores"] = result["client_cpu_s"] / result["duration_s"]
    figures["hit_time_limit"] = bool(result["timed_out"])
    figures["profiled"] = bool(args.profile)
    figures["quick"] = bool(args.quick)
    figures["bench_s"] = time.perf_counter() - started
    log(f"  {figures['turns']} turns in {figures['duration_s']:.1f}s = {figures['turns_per_s']:.0f} turns/s; "
        f"p50 {figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, {errors} errors")  # fmt: skip
    emit(figures)


if __name__ == "__main__":
    main()
