"""What the HTTP benchmarks do around a server: build a data dir holding one long story, start and stop
`changji serve`, wait for it, and read its processes' CPU time and memory from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from _common import TENANT, build_story, log, texts


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
    """The py-spy executable: $PY_SPY, on PATH, or beside this Python."""
    for candidate in (os.environ.get("PY_SPY"), shutil.which("py-spy"), str(Path(sys.executable).with_name("py-spy"))):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def family(pid: int) -> list[int]:
    """The process and its children (a server with workers: the supervisor and each worker; Linux /proc)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return [pid, *(int(child) for child in children)]


def cpu_seconds(pid: int | None, kernel: bool = False) -> float:
    """User + system CPU time of a process and its children so far (Linux /proc), 0 if unknown;
    `kernel`: the system time alone (the kernel's work for it: sockets, files, page faults)."""
    total = 0.0
    for member in family(pid) if pid is not None else []:
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += ((0 if kernel else int(fields[11])) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server (aiohttp shuts down gracefully on it) and wait; kill if it hangs."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        log("the server did not stop within 20s: killing it")
        proc.kill()
        proc.wait()


def build_variant(variant: str, data_dir: Path, story_turns: int) -> dict[str, str]:
    """A data dir holding one story of `story_turns` turns (compacted as it grew, or never) with its read
    models caught up, and a key for its tenant: what the driver needs to know of it."""
    from api.settings import Settings
    from domain.application import Changji
    from projections.read_models.store import ReadModels
    from projections.runner import ProjectionRunner
    from storage.service_db import ServiceDB

    settings = Settings(data_dir=data_dir)
    data_dir.mkdir(parents=True)
    app = Changji(env=settings.event_store_env())
    log(
        f"[{variant}] building a {story_turns}-turn story{' (compacted as it grows)' if variant == 'compacted' else ''}…"
    )
    t0 = time.perf_counter()
    compacted = variant == "compacted"
    off = None if compacted else {"pack_turns": 0}  # compaction off: nothing is summarized as it grows
    built = build_story(app, story_turns, texts(), tenant=TENANT, compact=compacted, settings=off,
                        label=f"[{variant}] ")  # fmt: skip
    log(f"[{variant}] built in {time.perf_counter() - t0:.1f}s")
    store = ReadModels(settings.read_models_path)
    runner = ProjectionRunner(app, store)
    t0 = time.perf_counter()
    position = runner.catch_up()
    log(f"[{variant}] read models caught up to {position:,} in {time.perf_counter() - t0:.1f}s")
    store.writer.conn.close()
    app.close()
    db = ServiceDB(settings.service_db_path)
    _, key = db.create_key(TENANT, "ops/bench/http_load.py")
    db.close()
    return {"key": key, "story_id": str(built.story_id), "tip": str(built.tip_id)}


def wait_settled(base: str, key: str, story_id: str, timeout: float) -> float:
    """Wait until the story's background work is settled (its backlog of scribe jobs, any compaction);
    return how long it took."""
    started = time.monotonic()
    request = urllib.request.Request(f"{base}/v1/stories/{story_id}/jobs", headers={"Authorization": f"Bearer {key}"})
    while time.monotonic() - started < timeout:
        with urllib.request.urlopen(request, timeout=10) as response:
            if json.loads(response.read())["settled"]:
                return time.monotonic() - started
        time.sleep(0.5)
    raise RuntimeError(f"the story's jobs did not settle within {timeout:.0f}s")


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (Linux /proc), MB; -1 if unknown."""
    total = -1.0
    for member in family(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total = max(total, 0.0) + int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def start_server(
    data_dir: Path, log_path: Path, embedder: str = "none"
) -> tuple[subprocess.Popen[bytes], str, str, float]:
    """`changji serve` on a fresh data dir with a key made first, recall by `embedder`; (process, base URL,
    key, startup s). A server that does not come up is stopped (not left over a data dir about to go)."""
    changji = str(Path(sys.executable).with_name("changji"))
    made = subprocess.run(
        [changji, "keys", "create", "--data-dir", str(data_dir), "--tenant", "local"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    key = made.stdout.strip().splitlines()[0]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [changji, "--log-level", "WARNING", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    env = {**os.environ, "CHANGJI_EMBEDDER": embedder}
    with log_path.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        wait_healthy(base, proc, timeout=120)
    except BaseException:
        stop(proc)
        raise
    return proc, base, key, time.perf_counter() - started
