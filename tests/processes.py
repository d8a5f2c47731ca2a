"""Real `changji` processes for end-to-end tests: run a command, or serve on a free loopback port."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHANGJI = str(Path(sys.executable).parent / "changji")


def run(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`changji` with these arguments (and `env` added to this process's environment)."""
    return subprocess.run(
        [CHANGJI, *args], capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **(env or {})}
    )


def new_key(data_dir: Path, tenant: str = "local", env: Mapping[str, str] | None = None) -> str:
    """`changji keys create` for the data dir (made if missing): the key it prints."""
    created = run("keys", "create", "--data-dir", str(data_dir), "--tenant", tenant, env=env)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip().splitlines()[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    base: str
    key: str
    process: subprocess.Popen[bytes] | None = None
    data_dir: Path | None = None
    log: Path | None = None  # what the server wrote to stdout and stderr

    def call(self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json", **(headers or {})}
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def send(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Mapping[str, str], Any]:
        """`call` that answers an error too: (status, headers, JSON body or None)."""
        try:
            data = json.dumps(body).encode() if body is not None else None
            auth = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
            request = urllib.request.Request(
                self.base + path, data=data, method=method, headers={**auth, **(headers or {})}
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return response.status, dict(response.headers), json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, dict(error.headers), json.loads(raw) if raw else None


def wait_until_up(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"changji serve did not answer /healthz: {log.read_text()}")


@contextmanager
def serving(data_dir: Path, key: str, env: Mapping[str, str] | None = None, workers: int = 1) -> Iterator[Server]:
    """`changji serve` (with `workers` serving processes) until the block ends (then a clean stop),
    unless the block killed it itself."""
    port, log = free_port(), data_dir.parent / f"serve-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [CHANGJI, "serve", "--data-dir", str(data_dir), "--port", str(port), "--workers", str(workers)],
            stdout=out,
            stderr=out,
            env={**os.environ, **(env or {})},
        )
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process, log)
        yield Server(f"http://127.0.0.1:{port}", key, process, data_dir, log)
    finally:
        if process.poll() is None:
            process.terminate()
            _stopped(process, log)


def _stopped(process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait for a terminated server to end with status 0; one that hangs has every thread of it and of
    its workers printed to its log (SIGUSR1), is killed, and fails the test with that log."""
    try:
        assert process.wait(timeout=40) == 0, log.read_text()  # (workers have 30 s before their parent kills them)
        assert "did not stop within" not in log.read_text(), log.read_text()  # (nor a worker, killed by its parent)
    except subprocess.TimeoutExpired:
        family = [*_children(process.pid), process.pid]  # (the workers' stacks first)
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        time.sleep(1.0)
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
        raise AssertionError(f"changji serve did not stop within 40 s:\n{log.read_text()}") from None


def _children(pid: int) -> list[int]:
    """Every process descending from `pid` (workers lead process groups of their own)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # (a process that ended meanwhile)
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
