"""`changji serve --workers 2`: real processes on one socket and one data dir. A write answered by one
worker is read by the other; clients racing on one story through both lose nothing; background jobs
run once, by the leader, and another takes over when it ends; a worker that dies is started again;
SIGTERM stops them all."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.error import HTTPError

import pytest

from providers.fake_server import FakeModelServer, Text
from storage import read_model_files
from tests.processes import Server, new_key, run, serving

pytestmark = pytest.mark.slow
SMALL = {"keep_turns": 2, "pack_turns": 3, "episodes_kept": 1, "min_pack_chars": 0}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    data_dir = tmp_path / "data"
    with serving(data_dir, new_key(data_dir), workers=2) as served:
        yield served


def health(server: Server) -> dict[str, Any]:
    with urllib.request.urlopen(server.base + "/healthz", timeout=10) as response:  # (a new connection each time)
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def workers(server: Server) -> list[int]:
    """The worker processes under the supervisor (Linux /proc)."""
    assert server.process is not None
    pid = server.process.pid
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def both_answer(server: Server, seconds: float = 30) -> set[int]:
    """The workers seen answering /healthz within `seconds` (a new one may still be starting)."""
    seen: set[int] = set()
    deadline = time.monotonic() + seconds
    while len(seen) < 2 and time.monotonic() < deadline:
        seen.add(health(server)["worker"])
    return seen


def a_story(server: Server, **settings: Any) -> str:
    card = server.call("POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
    story_id: str = server.call("POST", "/v1/stories", {"card_id": card["id"], "settings": settings})["id"]
    return story_id


def test_every_write_is_read_by_whichever_worker_answers_next(server: Server) -> None:
    assert both_answer(server) == {0, 1}
    story_id = a_story(server)
    written = []
    for i in range(30):  # each request on a new connection: the two workers take turns at random
        for kind, text in (("user", f"第{i}问"), ("reply", f"第{i}答")):
            node = server.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": kind, "text": text})["node"]
            written.append(node["id"])
            path = server.call("GET", f"/v1/stories/{story_id}/path?limit=100")["nodes"]
            assert [n["id"] for n in path][1:] == written  # the path, from the aggregates
            tree = server.call("GET", f"/v1/stories/{story_id}/tree?limit=100")["nodes"]
            assert [n["id"] for n in tree][1:] == written  # the tree, from the read models
            story = server.call("GET", f"/v1/stories/{story_id}")
            assert story["leaf_id"] == node["id"]  # the story, from the aggregates
        context = server.call("GET", f"/v1/stories/{story_id}/context")
        assert context["messages"][-1]["content"] == f"第{i}答"
    hits = server.call("GET", f"/v1/stories/{story_id}/search?q=%E7%AC%AC29%E9%97%AE")["hits"]  # 第29问
    assert [h["node_id"] for h in hits] == [written[-2]]


def test_clients_racing_on_one_story_through_both_workers_lose_nothing(server: Server) -> None:
    story_id = a_story(server)
    root = server.call("GET", f"/v1/stories/{story_id}")["root_id"]
    acknowledged: list[tuple[str, str]] = []
    failures: list[BaseException] = []

    def play(client: int) -> None:
        tip = root
        try:
            for i in range(15):
                for kind in ("user", "reply"):
                    body = {"kind": kind, "text": f"{client}-{i}-{kind}", "parent_id": tip}
                    tip = server.call("POST", f"/v1/stories/{story_id}/nodes", body)["node"]["id"]
                    acknowledged.append((tip, body["text"]))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=play, args=(c,)) for c in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    tree = server.call("GET", f"/v1/stories/{story_id}/tree?limit=1000")["nodes"]
    assert {n["id"] for n in tree} == {root} | {node for node, _ in acknowledged}
    assert server.call("GET", f"/v1/stories/{story_id}")["version"] > len(acknowledged)  # every leaf move kept


def test_jobs_run_once_and_another_worker_leads_when_the_leader_dies(server: Server) -> None:
    story_id = a_story(server, **SMALL)
    for i in range(8):
        server.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": "user", "text": f"第{i}问" + "雨" * 80})
        server.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": "reply", "text": f"第{i}答" + "风" * 80})
    settle(server, story_id)
    jobs = server.call("GET", f"/v1/jobs?story_id={story_id}&limit=500")["items"]
    compactions = [j for j in jobs if j["kind"] == "compact"]
    assert compactions and all(j["status"] == "done" and j["attempts"] == 0 for j in compactions)
    summaries = server.call("GET", f"/v1/stories/{story_id}/summaries")
    assert summaries["episodes"]
    leader = next(pid for pid in workers(server) if leads(server, pid))
    os.kill(leader, signal.SIGKILL)
    for i in range(8, 12):  # more work due, while the survivor (or the dead one's successor) takes the lead
        server.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": "user", "text": f"第{i}问" + "雨" * 80})
        server.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": "reply", "text": f"第{i}答" + "风" * 80})
    settle(server, story_id)
    later = server.call("GET", f"/v1/stories/{story_id}/summaries")
    assert len(later["episodes"]) > len(summaries["episodes"]) or later["digest"] != summaries["digest"]


def leads(server: Server, pid: int) -> bool:
    """Whether the worker `pid` holds the lead, as /proc's lock list tells (flock on leader.lock)."""
    for _ in range(200):
        answer = health(server)
        if answer["leader"]:
            break
    assert server.data_dir is not None
    inode = os.stat(server.data_dir / "leader.lock").st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "FLOCK" in fields and fields[4] == str(pid) and fields[5].endswith(f":{inode}"):
            return True
    return False


def settle(server: Server, story_id: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.call("GET", f"/v1/stories/{story_id}/jobs")["settled"]:
            return
        time.sleep(0.2)
    raise AssertionError(f"the story's jobs did not settle within {seconds} s")


def test_a_worker_that_dies_is_started_again_and_the_service_answers_on(server: Server) -> None:
    first = workers(server)
    assert len(first) == 2
    os.kill(first[0], signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = workers(server)
        if len(now) == 2 and first[0] not in now:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the dead worker was not started again")
    ok = 0
    for _ in range(50):
        try:
            assert health(server)["status"] == "ok"
            ok += 1
        except (HTTPError, OSError):
            time.sleep(0.1)  # (the new worker may still be starting: the other one answers)
    assert ok >= 45
    assert both_answer(server) == {0, 1}


def test_sigterm_stops_every_worker(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = new_key(data_dir)
    with serving(data_dir, key, workers=2) as served:
        children = workers(served)
        assert served.process is not None
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=30) == 0
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


class Connection:
    """One keep-alive connection, so one worker: the same process answers every request sent on it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        host, port = server.base.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=20)
        self.worker = self.get("/healthz")["worker"]

    def get(self, path: str) -> Any:
        return self.send("GET", path)

    def send(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        self.request(method, path, body, headers)
        response = self.conn.getresponse()
        data = response.read()
        assert response.status < 300, data
        return json.loads(data)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> None:
        sent = {"Authorization": f"Bearer {self.server.key}", "Content-Type": "application/json", **(headers or {})}
        self.conn.request(method, path, json.dumps(body).encode() if body is not None else None, sent)


def of_another_worker(server: Server, than: int) -> Connection:
    for _ in range(400):
        connection = Connection(server)
        if connection.worker != than:
            return connection
        connection.conn.close()
    raise AssertionError("every connection went to the same worker")


def sse(response: http.client.HTTPResponse) -> Iterator[tuple[str, dict[str, Any]]]:
    kind = None
    for raw in response:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: ") and kind is not None:
            yield kind, json.loads(line.removeprefix("data: "))


async def test_a_stop_answered_by_another_worker_stops_the_turn_and_keeps_what_was_streamed(tmp_path: Path) -> None:
    slow = [f"第{i}句。" for i in range(1, 41)]
    async with FakeModelServer(lambda body: Text(slow, chunk_delay=0.1)) as fake:
        data_dir = tmp_path / "data"
        key = new_key(data_dir)
        env = {"CHANGJI_MAIN_BASE_URL": fake.url, "CHANGJI_MAIN_MODEL": "fake-main"}
        with serving(data_dir, key, env, workers=2) as server:
            outcome = await asyncio.to_thread(stop_from_the_other_worker, server)
    streamed, stopped, events, history = outcome
    assert stopped["was_running"] is True
    reply = stopped["reply"]
    assert reply["phase"] == "stopped" and reply["text"].startswith("第1句。")
    assert [kind for kind, _ in events][-2:] == ["stopped", "done"]
    assert streamed == reply["text"] != "".join(slow)  # what the player saw is what was kept
    assert history["stopped"]["reason"] == "stopped"


def stop_from_the_other_worker(server: Server) -> tuple[str, Any, list[tuple[str, Any]], Any]:
    turn = Connection(server)
    try:
        return _stop_from_the_other_worker(server, turn)
    finally:
        turn.conn.close()


def _stop_from_the_other_worker(server: Server, turn: Connection) -> tuple[str, Any, list[tuple[str, Any]], Any]:
    story_id = turn.send("POST", "/v1/stories", {"card_id": turn.send("POST", "/v1/cards", {"card": {
        "name": "沈砚", "first_mes": "门被风撞开。"}})["id"]})["id"]  # fmt: skip
    turn.request("POST", f"/v1/stories/{story_id}/turns", {"text": "你好。"}, {"Accept": "text/event-stream"})
    events = sse(turn.conn.getresponse())
    seen = [next(events)]
    reply_id = seen[0][1]["reply_id"]
    while sum(1 for kind, _ in seen if kind == "delta") < 3:
        seen.append(next(events))
    other = of_another_worker(server, turn.worker)
    try:
        stopped = other.send("POST", f"/v1/nodes/{reply_id}/stop")
        seen.extend(events)
        streamed = "".join(data["text"] for kind, data in seen if kind == "delta")
        return streamed, stopped, seen, other.get(f"/v1/nodes/{reply_id}/draft")
    finally:
        other.conn.close()


def test_every_write_is_read_by_both_workers_while_they_move_to_a_rebuilt_file(server: Server) -> None:
    assert server.data_dir is not None
    story_id = a_story(server)
    old = read_model_files.current(server.data_dir)
    rebuilt: list[subprocess.CompletedProcess[str]] = []
    rebuild = threading.Thread(
        target=lambda: rebuilt.append(run("projections", "rebuild", "--data-dir", str(server.data_dir), "--wait", "30"))
    )
    rebuild.start()
    written: list[str] = []
    deadline = time.monotonic() + 60
    while (rebuild.is_alive() or len(written) < 60) and time.monotonic() < deadline:
        kind = "user" if len(written) % 2 == 0 else "reply"
        node = server.call("POST", f"/v1/stories/{story_id}/nodes", {"kind": kind, "text": f"第{len(written)}句"})
        written.append(node["node"]["id"])
        tree = server.call("GET", f"/v1/stories/{story_id}/tree?limit=1000")["nodes"]  # (from the read models)
        assert [n["id"] for n in tree][1:] == written
    rebuild.join()
    assert rebuilt[0].returncode == 0 and "switched to it" in rebuilt[0].stdout, rebuilt[0].stdout + rebuilt[0].stderr
    assert read_model_files.current(server.data_dir) != old


def test_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = new_key(data_dir)
    with serving(data_dir, key, workers=2) as served:
        children = workers(served)
        assert served.process is not None
        served.process.kill()  # (no chance to stop them itself)
        served.process.wait(timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(alive(pid) for pid in children):
            time.sleep(0.1)
        assert not any(alive(pid) for pid in children)


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
