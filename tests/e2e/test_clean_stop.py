"""A busy `changji serve` stopped by SIGTERM (or Ctrl-C) ends every background task quietly: its log
holds nothing above INFO and no traceback, and it exits 0."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from urllib.error import URLError

import pytest

from tests.processes import Server, new_key, serving

pytestmark = pytest.mark.slow
BUSY = {"CHANGJI_JOB_SWEEP_SECONDS": "0.05", "CHANGJI_EMBEDDER": "hashing"}  # sweeps all the time, recall builds
SMALL = {"keep_turns": 1, "pack_turns": 2, "episodes_kept": 1, "min_pack_chars": 0}


def play(server: Server, story_id: str, turns: int, stop: threading.Event) -> None:
    try:
        for i in range(turns):
            if stop.is_set():
                return
            server.call(
                "POST", f"/v1/stories/{story_id}/nodes", {"kind": "user", "text": f"第{i}问：灯塔的钥匙在哪里？"}
            )
            server.call(
                "POST", f"/v1/stories/{story_id}/nodes", {"kind": "reply", "text": f"第{i}答：在门后的钉子上。"}
            )
            server.call("GET", f"/v1/stories/{story_id}/context")
    except (URLError, OSError):  # (the server stopping under it)
        return


@pytest.mark.parametrize(
    ("stop_signal", "workers"),
    [(signal.SIGTERM, 1), (signal.SIGINT, 1), (signal.SIGTERM, 2)],
    ids=["SIGTERM", "SIGINT", "SIGTERM-2-workers"],
)
def test_a_busy_server_stops_with_nothing_above_info_in_its_log(tmp_path: Path, stop_signal: int, workers: int) -> None:
    data_dir = tmp_path / "data"
    with serving(data_dir, new_key(data_dir), env=BUSY, workers=workers) as served:
        card = served.call("POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
        stories = [
            served.call("POST", "/v1/stories", {"card_id": card["id"], "settings": SMALL})["id"] for _ in range(3)
        ]
        stop = threading.Event()
        players = [threading.Thread(target=play, args=(served, story, 200, stop)) for story in stories]
        for player in players:
            player.start()
        for story in stories:  # (compactions due and running, a sweep in flight, requests on their way)
            for _ in range(200):
                jobs = served.call("GET", f"/v1/stories/{story}/jobs")
                if sum(jobs.get("counts", {}).values()) >= 3:
                    break
        assert served.process is not None and served.log is not None
        served.process.send_signal(stop_signal)
        assert served.process.wait(timeout=40) == 0, served.log.read_text()  # (a worker is killed after 30 s)
        stop.set()
        for player in players:
            player.join(timeout=30)
        log = served.log.read_text()
    assert " ERROR " not in log and " WARNING " not in log and " CRITICAL " not in log, log
    assert "Traceback" not in log and "did not stop within" not in log, log
