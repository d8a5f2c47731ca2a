"""Crash probe: kill -9 the server while clients write, retry every unanswered write with its
Idempotency-Key after the restart, and count what the stories hold.

    python ops/probe/kill_retries.py [--smoke] [--runs 20] [--writers 16] [--workers 1]
    python ops/probe/kill_retries.py --database-url postgresql://… [--servers 3] [--smoke] …

A real `changji serve` runs on a temp data dir. Each writer has a story of its own and appends nodes
to it (user, reply, user, …), each POST with an Idempotency-Key of its own. The probe kills the server
with SIGKILL `--runs` times, at random moments, and starts it again on the same data dir; a writer
whose request got no answer sends the same request with the same key until it is answered. At the end
every story's path is read back: each acknowledged write must be there exactly once (no write lost,
no duplicate), and no retry may be refused.

With `--workers N` the server runs N serving processes, and each kill is a SIGKILL to all of them at
once. With `--database-url URL` (an empty PostgreSQL database) `--servers N` processes (3 by default) run
on that database, each on its own port and data dir; each kill is a SIGKILL to one of them, picked at
random (the one that leads as often as any), started again right after; a writer whose request got no
answer sends it again, with the same key, to the next process. Figures (last-line JSON, `FIGURES`):
`runs`, `writers`, `workers`, `servers`, `acknowledged`, `retried`, `lost`, `duplicates`, `refused`,
`probe_s`. --smoke: 2 kills, 2 writers (unless `--runs` or `--writers` say otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

CHANGJI = str(Path(sys.executable).parent / "changji")
FULL = {"runs": 20, "writers": 16}
SMOKE = {"runs": 2, "writers": 2}
FIGURES = frozenset(
    {"runs", "writers", "workers", "servers", "acknowledged", "retried", "lost", "duplicates", "refused", "probe_s"}
)


class Served:
    def __init__(self, data_dir: Path, port: int, workers: int = 1, env: dict[str, str] | None = None) -> None:
        self.data_dir, self.port, self.workers, self.env = data_dir, port, workers, env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.base = f"http://127.0.0.1:{port}"
        self.log = (data_dir.parent / f"serve-{data_dir.name}.log").open("ab")

    def start(self) -> None:
        self.process = subprocess.Popen(
            [CHANGJI, "serve", "--data-dir", str(self.data_dir), "--port", str(self.port), "--workers", str(self.workers)],
            stdout=self.log, stderr=self.log,
            env={**os.environ, "CHANGJI_EMBEDDER": "none", **self.env},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("the server did not come up")

    def kill(self) -> None:
        """SIGKILL to the server and, with workers, to each of them at the same moment (as a crash of the
        machine would end them: none finishes what it was answering)."""
        assert self.process is not None
        pid = self.process.pid
        try:
            children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            children = []
        for member in [*children, pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        self.process.wait()
        for child in children:  # (gone before the next start: its socket and its locks let go)
            while Path(f"/proc/{child}").exists() and "zombie" not in Path(f"/proc/{child}/status").read_text():
                time.sleep(0.01)

    def stop(self) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=30)


def call(base: str, key: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        base + path, data=data, method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(headers or {})},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


class Writer(threading.Thread):
    def __init__(self, bases: list[str], key: str, story_id: str, index: int, stop: threading.Event) -> None:
        """`bases`: the servers, tried in turn from the writer's own (`index`), the next one after each
        request that got no answer."""
        super().__init__(daemon=True)
        self.bases, self.key, self.story_id, self.index, self.stop = bases, key, story_id, index, stop
        self.acked: list[str] = []
        self.retried = self.refused = 0

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            text = f"w{self.index}-{n}"
            body = {"kind": "user" if n % 2 == 0 else "reply", "text": text}
            attempts = 0
            while True:  # the same request, the same key, until it is answered
                try:
                    call(
                        self.bases[(self.index + n + attempts) % len(self.bases)],
                        self.key,
                        "POST",
                        f"/v1/stories/{self.story_id}/nodes",
                        body,
                        {"Idempotency-Key": text},
                    )
                    break
                except urllib.error.HTTPError as error:
                    self.refused += 1
                    print(f"refused {text}: {error.code} {error.read()[:200]!r}", file=sys.stderr)
                    return
                except OSError:  # the server is down (killed): try again once it is back
                    attempts += 1
                    time.sleep(0.05)
            self.retried += attempts > 0
            self.acked.append(text)
            n += 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="2 kills, 2 writers: finishes in seconds")
    parser.add_argument("--runs", type=int, help="kills (default 20)")
    parser.add_argument("--writers", type=int, help="clients writing, each to a story of its own (default 16)")
    parser.add_argument("--workers", type=int, default=1, help="serving processes (each is killed too)")
    parser.add_argument("--database-url", help="an empty PostgreSQL database: several servers share it")
    parser.add_argument("--servers", type=int, default=3, help="with --database-url: `changji serve` processes")
    args = parser.parse_args()
    if args.database_url is None:
        args.servers = 1
    plan = SMOKE if args.smoke else FULL
    args.runs = plan["runs"] if args.runs is None else args.runs
    args.writers = plan["writers"] if args.writers is None else args.writers
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="changji-probe-"))
    shared = {"CHANGJI_DATABASE_URL": args.database_url} if args.database_url else {}
    made = subprocess.run(
        [CHANGJI, "keys", "create", "--data-dir", str(root / "data-0")],
        capture_output=True, text=True, env={**os.environ, **shared},
    )  # fmt: skip
    if made.returncode != 0:
        raise SystemExit(f"no key: {made.stderr}")
    key = made.stdout.strip().splitlines()[0]
    servers = [Served(root / f"data-{i}", free_port(), args.workers, shared) for i in range(args.servers)]
    for served in servers:
        served.start()
    server = servers[0]
    card = call(server.base, key, "POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
    stories = [
        call(server.base, key, "POST", "/v1/stories", {"card_id": card["id"]})["id"] for _ in range(args.writers)
    ]
    stop = threading.Event()
    writers = [Writer([s.base for s in servers], key, sid, i, stop) for i, sid in enumerate(stories)]
    for writer in writers:
        writer.start()
    rng = random.Random(7)
    for run in range(args.runs):
        time.sleep(rng.uniform(0.3, 1.2))
        victim = servers[rng.randrange(len(servers))]
        victim.kill()
        print(
            f"run {run + 1}: killed {victim.base} with {sum(len(w.acked) for w in writers)} writes acknowledged",
            file=sys.stderr,
        )
        victim.start()
    time.sleep(0.5)
    stop.set()
    for writer in writers:
        writer.join(timeout=60)
    lost = duplicates = 0
    for writer, sid in zip(writers, stories, strict=True):
        texts = Counter(
            n["text"] for n in call(server.base, key, "GET", f"/v1/stories/{sid}/path?limit=10000")["nodes"]
        )
        lost += sum(1 for text in writer.acked if texts[text] == 0)
        duplicates += sum(count - 1 for text, count in texts.items() if count > 1)
    for served in servers:
        served.stop()
    print(
        json.dumps(
            {
                "runs": args.runs,
                "writers": args.writers,
                "workers": args.workers,
                "servers": args.servers,
                "acknowledged": sum(len(w.acked) for w in writers),
                "retried": sum(w.retried for w in writers),
                "lost": lost,
                "duplicates": duplicates,
                "refused": sum(w.refused for w in writers),
                "probe_s": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
