"""The open-loop load of `http_load.py --rate R`: turns started on a fixed schedule, whatever the server
answers, so that a slow answer does not slow the load down (a closed loop of clients that each wait on
their last answer measures its own queue instead: Little's law).

A turn is what a bring-your-own front end does: POST the user's words, GET the context at them, POST
the reply. Turn i starts at `i / rate` seconds; it is played on a branch no running turn is playing
(a branch off the story's tip is opened when every one is busy), so turns never contend for a leaf.
Each request goes to the next server in turn (round robin, as a plain load balancer sends them), so
a context is often read on another process than the one that took the words. A request's latency runs
from its send to its answer; a turn's, from the moment it was due (a turn the client itself started
late counts its lateness) to its reply's answer.

Figures: the request latencies `p50_ms`, `p99_ms`, `p999_ms` (and each kind's p99), the turns'
(`turn_p50_ms`, `turn_p99_ms`), `errors`, `achieved_turns_per_s`, `client_lag_p99_ms` (how late the
driver itself started turns: a load it could not offer), and `cpu_ms_per_turn` — the user and system
time, over the load, of every server process and (when the database runs on this machine) of
PostgreSQL's postmaster and every process under it (`server_…` and `database_…` apart), over the
turns finished.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import time
from pathlib import Path
from typing import Any

from _common import texts

KINDS = ("append_user", "context", "append_reply")


async def drive_open(config: dict[str, Any]) -> dict[str, Any]:
    """`config`: bases (the servers' URLs), key, story_id, tip, rate (turns/s), seconds. The raw
    latencies per kind and per turn, the errors, the turns started and finished, the client's lag."""
    import aiohttp

    pool = texts()
    bases, story_id, rate = config["bases"], config["story_id"], float(config["rate"])
    latencies: dict[str, list[float]] = {kind: [] for kind in KINDS}
    turns: list[float] = []
    errors: collections.Counter[str] = collections.Counter()
    idle: list[str] = []  # tips of branches no running turn plays
    sent = [0]
    lag: list[float] = []
    clock = time.perf_counter

    connector = aiohttp.TCPConnector(limit=0)
    headers = {"Authorization": f"Bearer {config['key']}"}
    async with aiohttp.ClientSession(
        headers=headers, connector=connector, timeout=aiohttp.ClientTimeout(total=30)
    ) as session:

        async def call(kind: str, method: str, path: str, **kw: Any) -> Any:
            base = bases[sent[0] % len(bases)]
            sent[0] += 1
            answered = await timed(session, kind, method, base + path, latencies, errors, **kw)
            if answered is None:
                return None
            return True if kind == "context" else json.loads(answered)

        nodes = f"/v1/stories/{story_id}/nodes"

        async def turn(due: float) -> None:
            tip = idle.pop() if idle else config["tip"]
            user_text, reply_text = pool.next_pair()
            user = await call("append_user", "POST", nodes, json={"kind": "user", "text": user_text, "parent_id": tip})
            if user is None:
                idle.append(tip)
                return
            words = user["node"]["id"]
            if await call("context", "GET", f"/v1/stories/{story_id}/context", params={"at": words}) is None:
                idle.append(tip)
                return
            reply = await call(
                "append_reply", "POST", nodes, json={"kind": "reply", "text": reply_text, "parent_id": words}
            )
            if reply is None:
                idle.append(tip)
                return
            idle.append(reply["node"]["id"])
            turns.append(clock() - due)

        warm = await session.get(bases[0] + f"/v1/stories/{story_id}/context", params={"at": config["tip"]})
        await warm.read()  # (the first context of a cold process: not part of the load)
        running: set[asyncio.Task[None]] = set()
        cpu, started = time.process_time(), clock()
        count = int(rate * config["seconds"])
        for i in range(count):
            due = started + i / rate
            wait = due - clock()
            if wait > 0:
                await asyncio.sleep(wait)
            lag.append(max(0.0, clock() - due))
            task = asyncio.create_task(turn(due))
            running.add(task)
            task.add_done_callback(running.discard)
        offered = clock() - started
        if running:
            await asyncio.wait(running, timeout=60)
        duration, cpu = clock() - started, time.process_time() - cpu
    return {
        "latencies": latencies,
        "turn_latencies": turns,
        "errors": dict(errors),
        "started": count,
        "finished": len(turns),
        "offered_s": offered,
        "duration_s": duration,
        "client_cpu_s": cpu,
        "client_lag_p99_ms": sorted(lag)[int(0.99 * (len(lag) - 1))] * 1000 if lag else -1,
    }


async def timed(
    session: Any,
    kind: str,
    method: str,
    url: str,
    latencies: dict[str, list[float]],
    errors: collections.Counter[str],
    **kw: Any,
) -> bytes | None:
    """One request, its latency noted under `kind`; its body, or None (counted as an error) when it
    failed or answered other than 2xx."""
    t0 = time.perf_counter()
    try:
        async with session.request(method, url, **kw) as response:
            data: bytes = await response.read()
            status = response.status
    except Exception as exc:  # a timeout or a dropped connection: an error without a latency
        errors[f"{kind}: {type(exc).__name__}"] += 1
        return None
    latencies[kind].append(time.perf_counter() - t0)
    if not 200 <= status < 300:
        errors[f"{kind}: HTTP {status} {data[:200]!r}"] += 1
        return None
    return data


def postmaster_of(url: str) -> int | None:
    """The pid of the PostgreSQL server at `url` when it runs on this machine (its backends are its
    children), else None."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("select pg_backend_pid()").fetchone()
    backend = int(row[0]) if row else 0
    try:
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None  # (another machine's)
    return int(fields[1])


def tree_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time so far of these processes and every process under them, those that ended
    included (a parent counts what its children it waited for used: a database backend that closed between
    two readings moves its time to the server, not out of the sum) (Linux /proc)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        children[int(fields[1])].append(pid)
        times[pid] = sum(int(field) for field in fields[11:15]) / tick  # (utime, stime, cutime, cstime)
    total, todo, seen = 0.0, list(pids), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += times.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total
