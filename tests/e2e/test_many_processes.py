"""Several `changji serve` processes, each with a data dir of its own, on one PostgreSQL database: clients
spread over them play one story with `If-Match`, a write answered by one is read by the next request on
another, a stale version is refused wherever it is sent, and when the process that leads is killed
(SIGKILL) the jobs go on in another within seconds."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.postgres_server import GivenServer, PrivateServer
from tests.processes import CHANGJI, Server, free_port, new_key, serving, wait_until_up

pytestmark = pytest.mark.slow

SMALL = {"keep_turns": 2, "pack_turns": 3, "episodes_kept": 1, "min_pack_chars": 0, "fill_window": False}
CARD = {"card": {"name": "灯塔守", "description": "守着北岬灯塔的老人。", "first_mes": "风很大。"}}


def shared_env(postgres_server: GivenServer | PrivateServer) -> dict[str, str]:
    return {
        "CHANGJI_DATABASE_URL": postgres_server.new_database(),
        "CHANGJI_EMBEDDER": "none",
        "CHANGJI_JOB_SWEEP_SECONDS": "0.2",
        "CHANGJI_JOB_RETRY_SECONDS": "0.1",
        "CHANGJI_POLL_INTERVAL": "5",  # (a process reads what others wrote because it asks, not by polling)
    }


def version(server: Server, story_id: str) -> str:
    status, headers, _ = server.send("GET", f"/v1/stories/{story_id}")
    assert status == 200
    return headers["ETag"]


def texts_on_path(server: Server, story_id: str) -> list[str]:
    context = server.call("GET", f"/v1/stories/{story_id}/context")
    return [m["content"] for m in context["messages"] if m["role"] != "system"]


def leader_of(servers: list[Server]) -> Server:
    leading = [s for s in servers if s.call("GET", "/healthz").get("leader")]
    assert len(leading) == 1, [s.call("GET", "/healthz") for s in servers]
    return leading[0]


@contextlib.contextmanager
def three_servers(tmp_path: Path, postgres_server: GivenServer | PrivateServer) -> Iterator[list[Server]]:
    """Three `changji serve` on one new database, each with its own data dir and port, one key for all."""
    env = shared_env(postgres_server)
    key = new_key(tmp_path / "a", env=env)
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(serving(tmp_path / name, key, env)) for name in "abc"]


def test_three_processes_play_one_story_and_each_reads_what_another_wrote(
    tmp_path: Path, postgres_server: GivenServer | PrivateServer
) -> None:
    with three_servers(tmp_path, postgres_server) as servers:
        card = servers[0].call("POST", "/v1/cards", CARD)
        story = servers[1].call("POST", "/v1/stories", {"card_id": card["id"]})
        story_id, written = story["id"], []
        for i in range(12):  # each turn: the version read on one process, written on the next, read on the third
            reader, writer, checker = servers[i % 3], servers[(i + 1) % 3], servers[(i + 2) % 3]
            seen = version(reader, story_id)
            text = f"第{i}句：灯还亮着。"
            status, headers, node = writer.send(
                "POST", f"/v1/stories/{story_id}/nodes", {"kind": "user" if i % 2 == 0 else "reply", "text": text},
                {"If-Match": seen},
            )  # fmt: skip
            assert status == 201, node
            written.append(text)
            assert headers["ETag"] != seen
            assert texts_on_path(checker, story_id)[-1] == text  # the next request, on another process
            assert checker.call("GET", f"/v1/stories/{story_id}")["leaf_id"] == node["node"]["id"]
            stale, _, problem = checker.send(
                "POST", f"/v1/stories/{story_id}/nodes", {"kind": "user", "text": "晚了一步"}, {"If-Match": seen}
            )
            assert stale == 409, problem  # the version another process moved on from
        for i in range(6):  # a scene edit answered by one process, read back from the read models of another
            editor, reader = servers[i % 3], servers[(i + 1) % 3]
            edited = editor.call("PATCH", f"/v1/stories/{story_id}/scene", {"patch": {"time": f"第{i}更"}})
            assert edited["state"]["time"] == f"第{i}更"
            scene = reader.call("GET", f"/v1/stories/{story_id}/scene")
            assert scene["state"]["time"] == f"第{i}更" and len(scene["patches"]) == len(edited["patches"])
        for server in servers:
            assert texts_on_path(server, story_id) == ["风很大。", *written]  # one story, the same on every process
            listed = server.call("GET", "/v1/stories")["items"]
            assert [s["id"] for s in listed] == [story_id]
            assert listed[0]["nodes"] == 13  # the greeting and the twelve


def test_the_jobs_go_on_in_another_process_when_the_leader_is_killed(
    tmp_path: Path, postgres_server: GivenServer | PrivateServer
) -> None:
    with three_servers(tmp_path, postgres_server) as servers:
        leader = leader_of(servers)
        others = [s for s in servers if s is not leader]
        card = others[0].call("POST", "/v1/cards", CARD)
        story = others[0].call("POST", "/v1/stories", {"card_id": card["id"], "settings": SMALL})
        assert leader.process is not None
        leader.process.kill()  # SIGKILL: no goodbye; the database lets go of its locks with its connections
        leader.process.wait()
        killed = time.monotonic()
        for i in range(5):  # a compaction is due after 2 + 3 turns
            others[i % 2].call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": f"第{i}问"})
            others[(i + 1) % 2].call(
                "POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": f"第{i}答：亮着。"}
            )
        done: list[dict[str, Any]] = []
        while time.monotonic() - killed < 20 and not done:
            jobs = others[0].call("GET", f"/v1/jobs?story_id={story['id']}&kind=compact")["items"]
            done = [j for j in jobs if j["status"] == "done"]
            time.sleep(0.1)
        took = time.monotonic() - killed
        assert done, jobs
        assert took < 5, f"the compaction ran {took:.1f} s after the leader was killed"
        assert leader_of(others) in others  # exactly one of the two leads now


def test_processes_started_at_once_on_a_new_database_all_serve_and_make_one_first_key(
    tmp_path: Path, postgres_server: GivenServer | PrivateServer
) -> None:
    env = {**os.environ, **shared_env(postgres_server)}
    ports = [free_port() for _ in range(3)]
    logs = [tmp_path / f"serve-{i}.log" for i in range(3)]
    processes = []
    for i, (port, log) in enumerate(zip(ports, logs, strict=True)):
        with log.open("wb") as out:
            processes.append(subprocess.Popen(
                [CHANGJI, "serve", "--data-dir", str(tmp_path / f"d{i}"), "--port", str(port)],
                stdout=out, stderr=out, env=env,
            ))  # fmt: skip
    try:
        for port, process, log in zip(ports, processes, logs, strict=True):
            wait_until_up(f"http://127.0.0.1:{port}", process, log)
        printed = [
            line.strip() for log in logs for line in log.read_text().splitlines() if line.strip().startswith("cj_")
        ]
        assert len(printed) == 1  # the first start's key: made once, by one of them
        server = Server(f"http://127.0.0.1:{ports[2]}", printed[0])
        assert server.call("GET", "/v1/cards")["items"] == []  # accepted by every process
        assert Server(f"http://127.0.0.1:{ports[0]}", printed[0]).call("GET", "/v1/stories")["items"] == []
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=40)
