"""Pending work survives a crash: `changji serve` is killed (SIGKILL) after a reply is sealed and while
its scribe call is in flight; after a restart the job is found by the sweep and runs exactly once. And a
card memory whose merge a crash cut off is merged after the restart, its recap not written again."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from providers.fake_memory import memory_writer
from providers.fake_server import FakeModelServer, Step, Text
from tests.processes import new_key, serving
from tests.scene_support import SIDE_MODEL, answer

pytestmark = pytest.mark.slow


@contextmanager
def fake_in_a_thread(fallback: Any) -> Iterator[FakeModelServer]:
    """A fake model server on its own event loop, reachable from another process."""
    loop = asyncio.new_event_loop()
    fake = FakeModelServer(fallback)
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(fake.__aenter__())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(fake.__aexit__(None, None, None))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield fake
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def side_env(fake: FakeModelServer, **more: str) -> dict[str, str]:
    """`changji serve`'s environment with `fake` as its side model (no client retries), and `more`."""
    return {
        "CHANGJI_SIDE_BASE_URL": fake.url,
        "CHANGJI_SIDE_MODEL": SIDE_MODEL,
        "CHANGJI_SIDE_MAX_RETRIES": "0",
        **more,
    }


def wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_scribe_job_cut_off_by_a_crash_runs_once_after_the_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = new_key(data_dir)
    stalled = {"on": True}

    def scribe(body: Mapping[str, Any]) -> Step:
        return Text("{}", delay=60) if stalled["on"] else answer({"location": "灯塔", "time": "第一夜"})

    with fake_in_a_thread(scribe) as fake:
        env = side_env(fake, CHANGJI_JOB_SWEEP_SECONDS="0.1")
        with serving(data_dir, key, env) as server:
            card = server.call("POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
            story = server.call("POST", "/v1/stories", {"card_id": card["id"]})
            server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": "你一个人守了多久？"})
            reply = server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": "七年。"})
            wait_for(lambda: len(fake.requests) == 1)  # the scribe is calling: the reply is sealed, no outcome yet
            assert server.process is not None
            server.process.kill()
            server.process.wait(10)

        stalled["on"] = False
        with serving(data_dir, key, env) as server:
            jobs_url = f"/v1/jobs?story_id={story['id']}"
            wait_for(lambda: server.call("GET", jobs_url)["items"][0]["status"] == "done")
            job = server.call("GET", jobs_url)["items"][0]
            scene = server.call("GET", f"/v1/stories/{story['id']}/scene")
            replay = server.call("GET", f"/v1/stories/{story['id']}/replay")
            time.sleep(0.5)  # a few more sweeps: nothing else may run
            assert len(fake.requests) == 2

    assert job["node_id"] == reply["node"]["id"] and job["attempts"] == 0
    assert scene["source_node_id"] == reply["node"]["id"] and scene["state"]["location"] == "灯塔"
    events = [e["type"] for step in replay["steps"] for e in step["events"]]
    assert events.count("ScenePatched") == 1 and events.count("ModelCalled") == 1


def test_a_card_memory_merge_cut_off_by_a_crash_is_made_after_the_restart_and_the_recap_is_not_written_again(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    key = new_key(data_dir)
    stalled = {"on": True}
    writer = memory_writer()

    def side(body: Mapping[str, Any]) -> Step:
        merging = "记忆手册" in body["messages"][0]["content"]
        return Text("", delay=60) if merging and stalled["on"] else writer(body)

    with fake_in_a_thread(side) as fake:
        env = side_env(fake, CHANGJI_MEMORY_SWEEP_SECONDS="0.2")
        with serving(data_dir, key, env) as server:
            card = server.call("POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
            body = {"card_id": card["id"], "settings": {"recap_quiet_minutes": 0}}
            story = server.call("POST", "/v1/stories", body)
            server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": "你一个人守了多久？"})
            server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": "七年，灯油快用完了。"})
            merges = lambda: [b for b in fake.requests if "记忆手册" in b["messages"][0]["content"]]  # noqa: E731
            wait_for(lambda: len(merges()) == 1)  # the recap is written, the merge is being asked for
            memory = server.call("GET", f"/v1/cards/{card['id']}/memory")
            assert len(memory["recaps"]) == 1 and memory["merge_due"] and not memory["resident"]
            assert server.process is not None
            server.process.kill()
            server.process.wait(10)

        stalled["on"] = False
        with serving(data_dir, key, env) as server:
            url = f"/v1/cards/{card['id']}/memory"
            wait_for(lambda: not server.call("GET", url)["merge_due"])
            time.sleep(1.0)  # a few more sweeps: nothing else may run
            memory = server.call("GET", url)
            recaps = [b for b in fake.requests if b["messages"][0]["content"].startswith("你为角色扮演故事写复盘")]

    (recap,) = memory["recaps"]
    assert recap["version"] == 1 and len(recaps) == 1  # the recap of that path, written once
    assert memory["merged_by"] == "model" and "灯油快用完了" in memory["handbook"]["text"]
    assert len(merges()) == 2  # the one the crash cut off, and the one after the restart
