"""Real processes: the `changji` console script — demo, keys, serve across restarts, projections rebuild, replay."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import quote

import pytest

from projections.read_models.store import REBUILT, ReadModels
from storage import read_model_files
from tests.processes import new_key, run, serving

pytestmark = pytest.mark.slow
TURNS = [("user", "今天天气很好。"), ("reply", "风停了。"), ("user", "灯塔还亮着吗？"), ("reply", "亮着。")]


@dataclass
class Played:
    data_dir: Path
    key: str
    story: dict[str, Any]
    path: list[str]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    """A key, then a story of two turns written through a served process that is then stopped."""
    data_dir = tmp_path_factory.mktemp("served") / "data"
    key = new_key(data_dir)
    with serving(data_dir, key) as server:
        card = server.call("POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
        story = server.call("POST", "/v1/stories", {"card_id": card["id"]})
        for kind, text in TURNS:
            server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": kind, "text": text})
        path = [n["id"] for n in server.call("GET", f"/v1/stories/{story['id']}/path")["nodes"]]
    return Played(data_dir, key, story, path)


def test_demo_prints_the_explain_list_and_a_forked_world_line() -> None:
    result = run("demo")
    assert result.returncode == 0, result.stderr
    assert "explain:" in result.stdout
    assert any("world line" in line and "分出" in line for line in result.stdout.splitlines())


def test_story_survives_a_server_restart(played: Played) -> None:
    with serving(played.data_dir, played.key) as server:
        story = server.call("GET", f"/v1/stories/{played.story['id']}")
        path = server.call("GET", f"/v1/stories/{played.story['id']}/path")["nodes"]
        hits = server.call("GET", f"/v1/stories/{played.story['id']}/search?q={quote('天气')}")["hits"]
    assert story["leaf_id"] == played.path[-1]
    assert [n["id"] for n in path] == played.path
    assert [h["node_id"] for h in hits] == [played.path[1]]


def _rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    store = ReadModels(path)
    store.index_texts(10**9)  # what the server's background indexing or a search would do
    rows = store.dump()
    rows["positions"] = [r for r in rows["positions"] if r["name"] != REBUILT]
    store.writer.conn.close()
    return rows


def test_projections_rebuild_replays_every_event_while_the_server_is_stopped(played: Played) -> None:
    old = read_model_files.current(played.data_dir)
    before = _rows(old)
    result = run("projections", "rebuild", "--data-dir", str(played.data_dir))
    assert result.returncode == 0, result.stderr
    assert "rebuilt read models at position" in result.stdout and "in use from the next start" in result.stdout
    new = read_model_files.current(played.data_dir)
    assert new != old and new.exists() and not old.exists()  # a new file; the old one removed
    assert _rows(new) == before
    with serving(played.data_dir, played.key) as server:  # … and a restarted server reads from it
        path = server.call("GET", f"/v1/stories/{played.story['id']}/path")["nodes"]
    assert [n["id"] for n in path] == played.path


@pytest.mark.parametrize("workers", [1, 2])
def test_a_rebuild_beside_a_running_server_is_switched_to_without_a_stop(tmp_path: Path, workers: int) -> None:
    data_dir = tmp_path / "live"
    key = new_key(data_dir)
    with serving(data_dir, key, workers=workers) as server:
        card = server.call("POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
        story = server.call("POST", "/v1/stories", {"card_id": card["id"]})
        for kind, text in TURNS:
            server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": kind, "text": text})
        old = read_model_files.current(data_dir)
        result = run("projections", "rebuild", "--data-dir", str(data_dir), "--wait", "30")
        assert result.returncode == 0, result.stderr
        assert "the running service switched to it" in result.stdout, result.stdout
        new = read_model_files.current(data_dir)
        deadline = time.monotonic() + 10  # (other workers switch at their next look, the old file goes after)
        while old.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert new != old and not old.exists()
        server.call("POST", f"/v1/stories/{story['id']}/nodes", {"kind": "user", "text": "风停了吗？"})  # written after
        for _ in range(10):  # (each call on a new connection: every worker answers alike)
            nodes = server.call("GET", f"/v1/stories/{story['id']}/path")["nodes"]
            hits = server.call("GET", f"/v1/stories/{story['id']}/search?q={quote('风停')}")["hits"]
            assert [n["text"] for n in nodes[1:]][-1] == "风停了吗？"
    assert [n["text"] for n in nodes[1:]] == [t for _, t in TURNS] + ["风停了吗？"]
    assert {h["node_id"] for h in hits} >= {nodes[-1]["id"]}
    store = ReadModels(new)  # the switched-to file holds what was written after the switch
    assert store.writer.execute("select count(*) from nodes where story_id = ?", [story["id"]]).fetchone()[0] == 6


def test_replay_command_prints_the_paths_events(played: Played) -> None:
    result = run("replay", played.story["id"], "--data-dir", str(played.data_dir), "--tenant", "local")
    assert result.returncode == 0, result.stderr
    types = [line.split()[2] for line in result.stdout.splitlines() if line.startswith("d")]
    outcomes = [t for t in types if t == "SideJobSkipped"]  # the scribe's, with no side model configured
    assert [t for t in types if t not in outcomes] == [
        "GreetingPlaced", "UserSpoke", "ReplyPosted", "UserSpoke", "ReplyPosted"
    ]  # fmt: skip
    assert len(outcomes) <= 2


def test_first_serve_prints_a_working_key(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    with serving(data_dir, key="") as server:
        log = next(tmp_path.glob("serve-*.log")).read_text()
        server.key = next(word for word in log.split() if word.startswith("cj_"))
        assert server.call("GET", "/v1/cards") == {"items": [], "next_cursor": None}


def test_a_keyed_retry_after_a_crash_between_commit_and_answer_gets_what_was_made(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = new_key(data_dir)
    with serving(data_dir, key) as server:
        card = server.call("POST", "/v1/cards", {"card": {"name": "沈砚", "first_mes": "门被风撞开。"}})
    made: dict[str, Any] = {}
    crash = {"CHANGJI_FAULT_EXIT_AFTER_KEY": "retry-me"}
    keyed = {"Idempotency-Key": "retry-me"}
    with serving(data_dir, key, env=crash) as server:  # a story made, the answer never sent
        with pytest.raises(OSError):
            server.call("POST", "/v1/stories", {"card_id": card["id"]}, keyed)
        assert server.process is not None and server.process.wait(timeout=20) == 86
    with serving(data_dir, key) as server:
        with pytest.raises(HTTPError) as refused:  # the key with another body, even though no answer was kept
            server.call("POST", "/v1/stories", {"card_id": card["id"], "title": "另一个"}, keyed)
        assert refused.value.code == 422
        refused.value.close()
        made["story"] = server.call("POST", "/v1/stories", {"card_id": card["id"]}, keyed)
        stories = server.call("GET", "/v1/stories")["items"]
        assert [s["id"] for s in stories] == [made["story"]["id"]]  # one story, the one the crash made
    node_key = {"Idempotency-Key": "node-1"}
    body = {"kind": "user", "text": "灯塔还亮着吗？"}
    path = f"/v1/stories/{made['story']['id']}/nodes"
    with serving(data_dir, key, env={"CHANGJI_FAULT_EXIT_AFTER_KEY": "node-1"}) as server:
        with pytest.raises(OSError):
            server.call("POST", path, body, node_key)
        assert server.process is not None and server.process.wait(timeout=20) == 86
    with serving(data_dir, key) as server:
        retried = server.call("POST", path, body, node_key)
        again = server.call("POST", path, body, node_key)
        nodes = server.call("GET", f"/v1/stories/{made['story']['id']}/path")["nodes"]
    assert [n["text"] for n in nodes].count("灯塔还亮着吗？") == 1  # no duplicate, and no 422
    assert retried["node"]["id"] == again["node"]["id"] == nodes[-1]["id"]


def test_serve_says_what_it_runs_with_and_its_access_log_keeps_no_query_or_key(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = new_key(data_dir)
    with serving(data_dir, key, env={"CHANGJI_ACCESS_LOG": "1"}) as server:
        card = server.call("POST", "/v1/cards", {"card": {"name": "沈砚"}})
        story = server.call("POST", "/v1/stories", {"card_id": card["id"]})
        server.call("GET", f"/v1/stories/{story['id']}/search?q=private-words")
        with pytest.raises(HTTPError) as missing:
            server.call("GET", "/v1/x%0A2026-01-01%20forged%20line")
        missing.value.close()
    log = next(tmp_path.glob("serve-*.log")).read_text()
    assert "\n2026-01-01 forged line" not in log and "/v1/x%0A2026-01-01%20forged%20line 404" in log
    assert f"data in {data_dir.resolve()}" in log
    assert "main model: none" in log and "side model: none" in log and "recall: " in log
    assert f"GET /v1/stories/{story['id']}/search 200" in log  # the access log: path, status, size, time
    assert "private-words" not in log and key not in log
    assert log.rstrip().endswith("changji stopped")
