"""HTTP load: 64 concurrent bring-your-own clients on loopback, changji against a plain floor; or turns
offered at a fixed rate (`--rate`), on SQLite or on PostgreSQL with several processes.

    python ops/bench/http_load.py [--quick | --smoke] [--profile] [--variants floor,raw,compacted] [--embedder none]
    python ops/bench/http_load.py --rate R [--database-url URL] [--workers N] [--quick | --smoke]

Variants, run one after the other in one run (these machines are noisy: compare within a run):
- `floor`: aiohttp + SQLite doing a turn's minimum on the same routes (`serve_floor`: a committed
  insert per POST, a read by id per context, JSON in and out) — the ceiling of the stack here;
- `raw`: `changji serve` over one story of 10k turns (--quick: 1k; --smoke: 50) with branches and no
  summaries, played with compaction off (`pack_turns` 0, as an import leaves a story too); its first
  reply over the budget then asks for a compaction (reason budget), which runs during the load;
- `compacted`: the same story compacted as it grew (the offline summarizer, `_common.compact_now`).
Each served story is built directly with `Changji` in a temp data dir, its read models caught up and a
key made; the server starts as `changji serve` (CHANGJI_EMBEDDER from `--embedder`, default `none`:
recall on, by its two BM25 rankings; e5 would spend the run embedding 20k passages in the background)
and the load waits until the story's background jobs are settled.

The driver is a separate process (this script with `--drive`, one aiohttp client session). Each
client plays turns the way a BYO front end does, for `seconds` (30; --quick: 8; --smoke: 1, with 4
clients): POST the user's words under its own tip (the clients branch off the story's last reply, so
they never contend for a leaf), GET the context at them (recall and scene included), POST the reply.

Figures per variant (`raw_…`, `compacted_…`, `floor_…`): turns_per_s, p50/p99/max over all requests,
errors (non-2xx or exceptions), p50/p99 per request kind, the cold first context, the context answer's
size, the server's and the client's CPU in cores (and the server's system time, the kernel's share of
its CPU), the server's resident memory after the load; then `variant_ratio` (the faster served
variant's turns/s over the slower's), `variant_p99_ratio`, and each served variant's `share_of_floor`
(`FIGURES`: the keys of a run of all three variants).

`--profile`: py-spy (on PATH or $PY_SPY; `pip install py-spy`) attaches to each server once it is
settled and samples the thread holding the GIL for the whole load; the top functions, by own and by
inclusive samples, go to stderr. A profiled run's figures are a little slower than a plain one's.

`--rate R`: turns offered at a fixed rate to the compacted story, served by one `changji serve --workers N`
on SQLite or, with `--database-url` (an empty database, filled by `changji migrate`), by N processes with
data dirs of their own; the loop and its last line (`RATE_FIGURES`) are described in `_open_loop.py`.

(The script keeps its name: an `http.py` here would shadow the standard library's `http` package for
every import made while it runs as a script.)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import emit, figure_keys, log, median_ms, parse_args, percentile, sized, texts
from _open_loop import KINDS as TURN_KINDS
from _open_loop import drive_open, postmaster_of, timed, tree_cpu_seconds
from _serving import build_variant, cpu_seconds, free_port, py_spy, rss_mb, stop, wait_healthy, wait_settled

# each variant is driven for `seconds`: a fast server is measured as long as a slow one
FULL: dict[str, Any] = {"story_turns": 10_000, "seconds": 30.0, "clients": 64, "settle_limit": 600.0}
QUICK: dict[str, Any] = {"story_turns": 1_000, "seconds": 8.0, "clients": 64, "settle_limit": 120.0}
SMOKE: dict[str, Any] = {"story_turns": 50, "seconds": 1.0, "clients": 4, "settle_limit": 60.0}
KINDS = ("append_user", "append_reply", "context")
VARIANTS = ("floor", "raw", "compacted")
FIGURES = figure_keys(
    "story_turns", "clients", "{v}_turns_per_s", "{v}_p50_ms", "{v}_p99_ms", "{v}_max_ms", "{v}_errors", "{v}_turns",
    "{v}_duration_s", "{v}_{kind}_p50_ms", "{v}_{kind}_p99_ms", "{v}_cold_context_ms", "{v}_context_response_kb",
    "{v}_server_cpu_cores", "{v}_server_sys_cores", "{v}_client_cpu_cores", "{v}_server_rss_mb", "variant_ratio",
    "variant_p99_ratio", "{served}_share_of_floor", "profiled", "quick", "smoke", "bench_s",
    v=VARIANTS, kind=KINDS, served=("raw", "compacted"),
)  # fmt: skip


RATE_FIGURES = figure_keys(
    "rate",
    "workers",
    "postgresql",
    "story_turns",
    "seconds",
    "turns_started",
    "turns_finished",
    "achieved_turns_per_s",
    "p50_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
    "errors",
    "turn_p50_ms",
    "turn_p99_ms",
    "{kind}_p99_ms",
    "cpu_ms_per_turn",
    "server_cpu_ms_per_turn",
    "database_cpu_ms_per_turn",
    "client_lag_p99_ms",
    "quick",
    "smoke",
    "bench_s",
    kind=TURN_KINDS,
)  # fmt: skip (the last line of a run with --rate)


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", action="store_true", help="profile each server under py-spy while it serves")
    parser.add_argument("--idle", action="store_true", help="with --profile: every thread's samples, waiting ones too")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="which to run, in order (default: all three)")
    parser.add_argument("--profile-dir", type=Path, help="keep each variant's raw py-spy samples there")
    parser.add_argument("--embedder", default="none", help="CHANGJI_EMBEDDER of the served variants (default: none)")
    parser.add_argument("--workers", type=int, default=2, help="serving processes of the served variants (default: 2)")
    parser.add_argument("--rate", type=float, help="turns per second offered on a fixed schedule (an open loop)")
    parser.add_argument(
        "--database-url", help="with --rate: an empty PostgreSQL database, served by --workers processes"
    )
    parser.add_argument("--drive", metavar="CONFIG_JSON", help=argparse.SUPPRESS)  # the client process
    parser.add_argument("--drive-open", metavar="CONFIG_JSON", help=argparse.SUPPRESS)  # the open loop's
    parser.add_argument("--floor", metavar="PORT:PATH", help=argparse.SUPPRESS)  # the floor server process


# --- the floor: aiohttp and SQLite doing a turn's minimum ---------------------------------------------


def serve_floor(port: int, path: Path) -> None:
    """The same routes, doing only what a turn cannot do without: each POST a committed insert (WAL,
    synchronous=NORMAL, as changji's event store), each context GET a read of the node by its id, JSON
    in and out. No auth lookup, no events, no read models: the ceiling of aiohttp + SQLite on this machine."""
    import sqlite3

    from aiohttp import web

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=normal")
    db.execute("create table nodes (id text primary key, parent text, kind text, text text)")

    async def append(request: web.Request) -> web.Response:
        body = await request.json()
        node_id = str(uuid.uuid4())
        db.execute("begin")
        db.execute("insert into nodes values (?, ?, ?, ?)", (node_id, body["parent_id"], body["kind"], body["text"]))
        db.execute("commit")
        return web.json_response({"node": {"id": node_id, "kind": body["kind"], "text": body["text"]}}, status=201)

    async def context(request: web.Request) -> web.Response:
        row = db.execute("select id, kind, text from nodes where id = ?", (request.query.get("at"),)).fetchone()
        messages = [{"role": "user" if row[1] == "user" else "assistant", "content": row[2]}] if row else []
        return web.json_response({"leaf_id": request.query.get("at"), "messages": messages})

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_post("/v1/stories/{story_id}/nodes", append)
    app.router.add_get("/v1/stories/{story_id}/context", context)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


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
    state = {"done": 0}
    context_bytes: list[int] = []
    clock = time.perf_counter

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    headers = {"Authorization": f"Bearer {config['key']}"}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(headers=headers, connector=connector, timeout=timeout) as session:

        async def call(kind: str, method: str, url: str, **kw: Any) -> Any:
            data = await timed(session, kind, method, url, latencies, errors, **kw)
            if data is None:
                return None
            if kind == "context":
                context_bytes.append(len(data))
            return True if kind == "context" else json.loads(data)  # (the context is not read: the client's CPU
            # is the server's on this machine, and a front end sends it on to a model without parsing it)

        # the server's first context (cold aggregate and render caches), not part of the load
        t0 = clock()
        first = await session.get(context_url, params={"at": config["tip"]})
        await first.read()
        cold_ms = (clock() - t0) * 1000
        if first.status != 200:
            raise SystemExit(f"the first context failed: HTTP {first.status}")

        deadline = clock() + config["seconds"]

        async def client(index: int) -> None:
            tip = config["tip"]
            while clock() < deadline:
                user_text, reply_text = pool.next_pair()
                user = await call(
                    "append_user", "POST", nodes_url, json={"kind": "user", "text": user_text, "parent_id": tip}
                )
                if user is None:
                    continue
                words = user["node"]["id"]
                if await call("context", "GET", context_url, params={"at": words}) is None:
                    continue
                reply = await call("append_reply", "POST", nodes_url,
                                   json={"kind": "reply", "text": reply_text, "parent_id": words})  # fmt: skip
                if reply is not None:
                    tip = reply["node"]["id"]
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
        "client_cpu_s": cpu,
        "context_kb": sum(context_bytes) / len(context_bytes) / 1024 if context_bytes else -1,
    }


# --- the server and the measurement -----------------------------------------------------------------


def run_driver(config: dict[str, Any], flag: str = "--drive") -> dict[str, Any]:
    """The load, from a separate process (this script with --drive, or --drive-open)."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), flag, json.dumps(config)],
        stdout=subprocess.PIPE,
        timeout=config["seconds"] + 120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return result


def summarize_pyspy(raw: Path, variant: str, top: int = 30) -> None:
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
    log(f"\n== [{variant}] server profile (py-spy, {total} samples of the thread holding the GIL) ==\n-- self --")
    for name, n in own.most_common(top):
        log(f"{100 * n / total:6.1f}%  {name}")
    log("-- inclusive --")
    for name, n in inclusive.most_common(top + 20):
        log(f"{100 * n / total:6.1f}%  {name}")


def run_server(
    variant: str, tmp: Path, plan: dict[str, Any], args: argparse.Namespace, spy: str | None
) -> dict[str, Any]:
    """Build the variant, serve it (`changji serve`, or the floor), drive the load; the driver's result."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data_dir = tmp / variant
    config: dict[str, Any] = {
        "base": base, "clients": plan["clients"], "seconds": plan["seconds"],
    }  # fmt: skip
    env = {**os.environ, "CHANGJI_EMBEDDER": args.embedder}
    if variant == "floor":
        data_dir.mkdir(parents=True)
        config.update(key="floor", story_id=str(uuid.uuid4()), tip=str(uuid.uuid4()))
        command = [sys.executable, os.path.abspath(__file__), "--floor", f"{port}:{data_dir / 'floor.sqlite'}"]
    else:
        config.update(build_variant(variant, data_dir, plan["story_turns"]))
        changji = str(Path(sys.executable).with_name("changji"))
        command = [changji, "--log-level", "WARNING", "serve", "--data-dir", str(data_dir), "--port", str(port),
                   "--workers", str(args.workers)]  # fmt: skip
    raw = tmp / f"py-spy-{variant}.txt"
    log_path = tmp / f"server-{variant}.log"
    server_log = log_path.open("wb")
    proc = subprocess.Popen(command, stdout=server_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        wait_healthy(base, proc)
        if variant != "floor":
            settled = wait_settled(base, config["key"], config["story_id"], plan["settle_limit"])
            log(f"[{variant}] background jobs settled in {settled:.1f}s")
        server_cpu, server_sys = (cpu_seconds(proc.pid), cpu_seconds(proc.pid, kernel=True))
        profiler = None
        if spy:  # attached once the server is up and settled: the samples are of the load alone
            seconds = str(int(plan["seconds"]))
            profiler = subprocess.Popen(
                [spy, "record", "--pid", str(proc.pid), "--subprocesses", "--idle" if args.idle else "--gil",
                 "--format", "raw", "--rate", "200", "--duration", seconds, "--output", str(raw)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        log(
            f"[{variant}] server up on {base}; driving {plan['clients']} clients for {plan['seconds']:.0f}s "
            "from a separate process…"
        )
        result = run_driver(config)
        result["server_cpu_s"] = cpu_seconds(proc.pid) - server_cpu
        result["server_sys_s"] = cpu_seconds(proc.pid, kernel=True) - server_sys
        result["server_rss_mb"] = rss_mb(proc.pid)
        if profiler is not None:
            profiler.wait(timeout=60)
    except BaseException:
        server_log.flush()
        log(log_path.read_text(errors="replace")[-3000:])
        raise
    finally:
        stop(proc)
        server_log.close()
    if spy and raw.exists():
        summarize_pyspy(raw, variant)
        if args.profile_dir:
            args.profile_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(raw, args.profile_dir / raw.name)
    return result


def variant_figures(variant: str, result: dict[str, Any], figures: dict[str, Any]) -> None:
    latencies: dict[str, list[float]] = result["latencies"]
    every = [x for kind in KINDS for x in latencies[kind]]
    errors = sum(result["errors"].values())
    for message, count in sorted(result["errors"].items(), key=lambda kv: -kv[1])[:10]:
        log(f"[{variant}] error ×{count}: {message}")
    v = variant
    figures[f"{v}_turns_per_s"] = result["turns"] / result["duration_s"]
    figures[f"{v}_p50_ms"] = percentile(every, 50) * 1000
    figures[f"{v}_p99_ms"] = percentile(every, 99) * 1000
    figures[f"{v}_max_ms"] = max(every) * 1000 if every else -1
    figures[f"{v}_errors"] = errors
    figures[f"{v}_turns"] = result["turns"]
    figures[f"{v}_duration_s"] = result["duration_s"]
    for kind in KINDS:
        figures[f"{v}_{kind}_p50_ms"] = median_ms(latencies[kind])
        figures[f"{v}_{kind}_p99_ms"] = percentile(latencies[kind], 99) * 1000
    figures[f"{v}_cold_context_ms"] = result["cold_context_ms"]
    figures[f"{v}_context_response_kb"] = result["context_kb"]
    # cores busy during the load (2 on this machine)
    figures[f"{v}_server_cpu_cores"] = result.get("server_cpu_s", 0.0) / result["duration_s"]
    figures[f"{v}_server_sys_cores"] = result.get("server_sys_s", 0.0) / result["duration_s"]  # (of the above)
    figures[f"{v}_client_cpu_cores"] = result["client_cpu_s"] / result["duration_s"]
    figures[f"{v}_server_rss_mb"] = result.get("server_rss_mb", -1.0)
    log(f"[{v}] {result['turns']} turns in {result['duration_s']:.1f}s = {figures[f'{v}_turns_per_s']:.0f} turns/s; "
        f"p50 {figures[f'{v}_p50_ms']:.1f} ms, p99 {figures[f'{v}_p99_ms']:.1f} ms, {errors} errors")  # fmt: skip


def main() -> None:
    args = parse_args(__doc__, _extra)
    if args.drive:
        print(json.dumps(asyncio.run(drive(json.loads(args.drive)))), flush=True)
        return
    if args.drive_open:
        print(json.dumps(asyncio.run(drive_open(json.loads(args.drive_open)))), flush=True)
        return
    if args.floor:
        port, _, path = args.floor.partition(":")
        serve_floor(int(port), Path(path))
        return
    plan = sized(args, FULL, QUICK, SMOKE)
    if args.rate is not None:
        emit(offered(args, plan))
        return
    if args.database_url:
        raise SystemExit("--database-url goes with --rate")
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants: {', '.join(sorted(unknown))} (choose from {', '.join(VARIANTS)})")
    spy = py_spy() if args.profile else None
    if args.profile and spy is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy, or set $PY_SPY)")
    started = time.perf_counter()
    figures: dict[str, Any] = {"story_turns": plan["story_turns"], "clients": plan["clients"]}
    with tempfile.TemporaryDirectory(prefix="changji-bench-http-") as tmp:
        for variant in variants:
            variant_figures(variant, run_server(variant, Path(tmp), plan, args, spy), figures)
    served = [v for v in ("raw", "compacted") if v in variants]
    if len(served) == 2:
        rates = [figures[f"{v}_turns_per_s"] for v in served]
        figures["variant_ratio"] = max(rates) / min(rates) if min(rates) else -1
        figures["variant_p99_ratio"] = max(figures["raw_p99_ms"], figures["compacted_p99_ms"]) / max(
            min(figures["raw_p99_ms"], figures["compacted_p99_ms"]), 1e-9
        )
    if "floor" in variants and served:
        floor = figures["floor_turns_per_s"]
        for v in served:
            figures[f"{v}_share_of_floor"] = figures[f"{v}_turns_per_s"] / floor if floor else -1
    figures["profiled"] = bool(args.profile)
    figures["quick"] = bool(args.quick)
    figures["smoke"] = args.smoke
    figures["bench_s"] = time.perf_counter() - started
    emit(figures)


# --- turns offered at a rate --------------------------------------------------------------------------


def offered(args: argparse.Namespace, plan: dict[str, Any]) -> dict[str, Any]:
    """`--rate`: the compacted story served on SQLite or PostgreSQL, turns offered at the rate; the figures."""
    started = time.perf_counter()
    changji = str(Path(sys.executable).with_name("changji"))
    shared = {"CHANGJI_DATABASE_URL": args.database_url} if args.database_url else {}
    env = {**os.environ, "CHANGJI_EMBEDDER": args.embedder, **shared}
    with tempfile.TemporaryDirectory(prefix="changji-bench-rate-") as tmp:
        built = build_variant("compacted", Path(tmp) / "built", plan["story_turns"])
        if args.database_url:
            copied = subprocess.run([changji, "migrate", "--data-dir", f"{tmp}/built", "--to", args.database_url],
                                    capture_output=True, text=True, env=env)  # fmt: skip
            if copied.returncode != 0:
                raise SystemExit(f"changji migrate failed: {copied.stderr}")
            homes = [(f"{tmp}/served-{i}", "1") for i in range(args.workers)]
        else:
            homes = [(f"{tmp}/built", str(args.workers))]
        ports = [free_port() for _ in homes]
        logs = [open(f"{tmp}/server-{i}.log", "wb") for i in range(len(homes))]  # noqa: SIM115 (closed below)
        procs = [
            subprocess.Popen([changji, "--log-level", "WARNING", "serve", "--data-dir", home, "--port", str(port),
                              "--workers", workers], stdout=out, stderr=subprocess.STDOUT, env=env)
            for (home, workers), port, out in zip(homes, ports, logs, strict=True)
        ]  # fmt: skip
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        try:
            for base, proc in zip(bases, procs, strict=True):
                wait_healthy(base, proc, timeout=300)
            log(f"settled after {wait_settled(bases[0], built['key'], built['story_id'], plan['settle_limit']):.1f}s")
            database = [pid for pid in [postmaster_of(args.database_url)] if pid] if args.database_url else []
            servers = [proc.pid for proc in procs]
            before = tree_cpu_seconds(servers), tree_cpu_seconds(database)
            config = {**built, "bases": bases, "rate": args.rate, "seconds": plan["seconds"]}
            log(f"offering {args.rate:g} turns/s for {plan['seconds']:.0f}s to {len(bases)} server(s)…")
            result = run_driver(config, "--drive-open")
            server_cpu = tree_cpu_seconds(servers) - before[0]
            database_cpu = tree_cpu_seconds(database) - before[1]
        except BaseException:
            for out, path in zip(logs, range(len(logs)), strict=True):
                out.flush()
                log(Path(f"{tmp}/server-{path}.log").read_text(errors="replace")[-2000:])
            raise
        finally:
            for proc in procs:
                stop(proc)
            for out in logs:
                out.close()
    every = [x for kind in TURN_KINDS for x in result["latencies"][kind]]
    finished = max(result["finished"], 1)
    for message, count in sorted(result["errors"].items(), key=lambda kv: -kv[1])[:10]:
        log(f"error ×{count}: {message}")
    figures: dict[str, Any] = {
        "rate": args.rate, "workers": args.workers, "postgresql": bool(args.database_url),
        "story_turns": plan["story_turns"], "seconds": plan["seconds"],
        "turns_started": result["started"], "turns_finished": result["finished"],
        "achieved_turns_per_s": result["finished"] / result["duration_s"],
        "p50_ms": percentile(every, 50) * 1000, "p99_ms": percentile(every, 99) * 1000,
        "p999_ms": percentile(every, 99.9) * 1000, "max_ms": max(every, default=-0.001) * 1000,
        "errors": sum(result["errors"].values()),
        "turn_p50_ms": percentile(result["turn_latencies"], 50) * 1000,
        "turn_p99_ms": percentile(result["turn_latencies"], 99) * 1000,
        **{f"{kind}_p99_ms": percentile(result["latencies"][kind], 99) * 1000 for kind in TURN_KINDS},
        "cpu_ms_per_turn": (server_cpu + database_cpu) * 1000 / finished,
        "server_cpu_ms_per_turn": server_cpu * 1000 / finished,
        "database_cpu_ms_per_turn": database_cpu * 1000 / finished,
        "client_lag_p99_ms": result["client_lag_p99_ms"],
        "quick": bool(args.quick), "smoke": args.smoke, "bench_s": time.perf_counter() - started,
    }  # fmt: skip
    log(f"{figures['achieved_turns_per_s']:.0f} of {args.rate:g} turns/s: p50 {figures['p50_ms']:.1f} ms, p99 "
        f"{figures['p99_ms']:.1f} ms, p99.9 {figures['p999_ms']:.1f} ms, {figures['cpu_ms_per_turn']:.1f} ms CPU a turn")  # fmt: skip
    return figures


if __name__ == "__main__":
    main()
