"""The parent of `changji serve --workers N`: a worker that ends is started again, after a pause that
grows while workers keep dying young; SIGTERM stops every worker and then the parent, with status 0."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from api.supervisor import FIRST_PAUSE, Supervisor


def test_a_worker_that_dies_young_is_started_again_after_longer_and_longer_pauses(tmp_path: Path) -> None:
    starts = tmp_path / "starts"

    def command(index: int) -> list[str]:
        script = f"open({str(starts)!r}, 'a').write('{index}\\n'); import sys; sys.exit(3)"
        return [sys.executable, "-c", script]

    supervisor = Supervisor(command, 1, [])
    threading.Timer(2.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    started = time.monotonic()
    assert supervisor.run() == 0
    assert time.monotonic() - started < 10
    runs = starts.read_text().split()
    # the pauses double (0.5, 1, 2 s …): in 2.5 s a worker that dies at once is started 3 or 4 times
    assert 2 <= len(runs) <= 4 and supervisor.restarts >= len(runs) - 1
    assert supervisor.workers[0].pause > FIRST_PAUSE


def test_sigterm_stops_the_workers_then_the_parent(tmp_path: Path) -> None:
    stopped, ready = tmp_path / "stopped", tmp_path / "ready"

    def command(index: int) -> list[str]:
        script = (
            "import signal, sys, time\n"
            f"signal.signal(signal.SIGTERM, lambda *_: (open({str(stopped)!r}, 'a').write('{index}\\n'), sys.exit(0)))\n"
            f"open({str(ready)!r}, 'a').write('{index}\\n')\n"
            "time.sleep(60)\n"
        )
        return [sys.executable, "-c", script]

    def stop_once_both_listen() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (ready.exists() and len(ready.read_text().split()) == 2):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    supervisor = Supervisor(command, 2, [])
    threading.Thread(target=stop_once_both_listen, daemon=True).start()
    assert supervisor.run() == 0
    assert sorted(stopped.read_text().split()) == ["0", "1"]  # each worker heard it and finished
    assert supervisor.restarts == 0
