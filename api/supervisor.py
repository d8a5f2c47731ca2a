"""`changji serve --workers N`: N serving processes on one listening socket and one data dir.

Python runs one thread at a time per process, so one process serves on one core. With N workers the
parent (this module) binds the address, prepares what must be prepared once (the read models caught up
with the log, replayed in bulk when they are empty), and starts N copies of `changji serve` that inherit
the listening socket (`--listen-fds`): the kernel hands each new connection to one of them. Each worker
is a whole service on the shared files — the event store, the read models, the service database —
kept coherent as `service/log_follower.py` and `projections/read_models/store.py` describe; one of them
leads (`storage/leadership.py`) and runs the job system and the checkpoints.

The parent holds the data dir (`serve.lock`) and watches: a worker that ends is started again (after
a pause that grows while workers keep dying young); SIGINT or SIGTERM stops every worker (each
finishes what it was answering) and then the parent, with status 0. Workers run in their own process
group, so a Ctrl-C reaches the parent alone, and end with it should it be killed (`PR_SET_PDEATHSIG`
on Linux, and a look at their parent every second everywhere).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
BACKLOG = 1024
FIRST_PAUSE, LONGEST_PAUSE = 0.5, 30.0  # before a worker that ended is started again (doubling while they die young)
YOUNG = 10.0  # a worker that ends sooner than this after its start died young
STOP_SECONDS = 30.0  # how long the workers have to stop before they are killed
PR_SET_PDEATHSIG = 1


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound and listening sockets for every address `host` names (as aiohttp's own site binds them)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.set_inheritable(True)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    pause: float = FIRST_PAUSE
    due: float = 0.0  # when it may be started again (monotonic)
    history: list[float] = field(default_factory=list)


class Supervisor:
    def __init__(self, command: Callable[[int], Sequence[str]], count: int, fds: Sequence[int]) -> None:
        """`command(index)`: the argv of worker `index`; `fds`: the listening sockets it inherits."""
        self.command, self.fds = command, list(fds)
        self.workers = [_Worker(i) for i in range(count)]
        self._stop = threading.Event()
        self.restarts = 0

    def run(self) -> int:
        """Start the workers and keep them running until SIGINT or SIGTERM; 0 once they all stopped."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            for worker in self.workers:
                self._start(worker)
            while not self._stop.wait(0.2):
                now = time.monotonic()
                for worker in self.workers:
                    if worker.process is not None and worker.process.poll() is not None:
                        self._ended(worker, now)
                    if worker.process is None and now >= worker.due:
                        self._start(worker)
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def _on_signal(self, signum: int, _: object) -> None:
        log.info("%s: stopping the workers", signal.Signals(signum).name)
        self._stop.set()

    def _start(self, worker: _Worker) -> None:
        worker.started = time.monotonic()
        try:
            worker.process = subprocess.Popen(
                list(self.command(worker.index)), pass_fds=self.fds, stdin=subprocess.DEVNULL, process_group=0
            )
        except OSError as exc:  # (no processes or memory left, for now): tried again after a pause
            worker.pause = min(LONGEST_PAUSE, worker.pause * 2)
            worker.due = worker.started + worker.pause
            log.error("could not start worker %s (%s): trying again in %.1f s", worker.index, exc, worker.pause)

    def _ended(self, worker: _Worker, now: float) -> None:
        assert worker.process is not None
        code, lived = worker.process.returncode, now - worker.started
        worker.process = None
        worker.pause = min(LONGEST_PAUSE, worker.pause * 2) if lived < YOUNG else FIRST_PAUSE
        worker.due = now + worker.pause
        self.restarts += 1
        log.error("worker %s ended (status %s) after %.1f s: starting it again in %.1f s", worker.index, code, lived,
                  worker.pause)  # fmt: skip

    def _stop_all(self) -> None:
        running = [w.process for w in self.workers if w.process is not None and w.process.poll() is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker %s did not stop within %.0f s: its threads, then a kill", process.pid, STOP_SECONDS)
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGUSR1)  # (each worker prints its threads' stacks at SIGUSR1)
                    time.sleep(0.5)
                process.kill()
                process.wait()


def worker_argv(index: int, count: int, fds: Sequence[int], data_dir: str, log_level: str) -> list[str]:
    """`changji serve` as worker `index` of `count` on inherited sockets, a child of this process (whatever
    way this `changji` was started)."""
    return [
        sys.executable, "-c", "from api.cli import main; main()", "--log-level", log_level, "serve",
        "--data-dir", data_dir, "--workers", str(count), "--listen-fds", ",".join(map(str, fds)),
        "--worker-index", str(index), "--parent-pid", str(os.getpid()),
    ]  # fmt: skip


def end_with_parent(parent: int) -> None:
    """Make this process end when its parent does: SIGTERM at the parent's death (Linux), and — should
    that be missing, or the parent already gone — a thread that looks every second."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="changji-parent-watch", daemon=True).start()
