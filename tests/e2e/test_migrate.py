"""`changji migrate --to postgresql://…`: a SQLite data dir played over HTTP is copied into an empty
PostgreSQL database; a service on it (a data dir of its own, its read models folded from the copied log)
answers every read as the SQLite one did, keeps the keys and the blobs, and a second copy is refused."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from api.app import SERVICE
from tests.builders import TENANT, Api, MakeClient, api_for
from tests.postgres_server import GivenServer, PrivateServer
from tests.processes import run
from tests.scene_support import settled
from tests.shared_data import cards_dir

pytestmark = pytest.mark.slow


async def play(api: Api) -> dict[str, Any]:
    """A story with branches, a save, an imported card with its art: what the copy must carry."""
    card = await api.send("POST", "/v1/cards/import", (cards_dir() / "default_Seraphina.png").read_bytes())
    story = await api.story(card["id"], keep_turns=2, pack_turns=3, min_pack_chars=0)
    first = None
    for i in range(105):  # (over 200 events on the story: a snapshot of it is taken, and copied)
        user, reply = await api.turn(story["id"], f"第{i}问：灯还亮着吗？", f"第{i}答：亮着。")
        first = first or reply
    await api.call(
        "POST", f"/v1/stories/{story['id']}/nodes", {"kind": "reply", "text": "另一种说法。", "parent_id": user}, 201
    )
    await api.call("POST", f"/v1/stories/{story['id']}/saves", {"name": "岔路口", "node_id": first}, 201)
    return {"card": card, "story": story}


READS = (
    "/v1/cards", "/v1/cards/{card}", "/v1/stories", "/v1/stories/{story}", "/v1/stories/{story}/context",
    "/v1/stories/{story}/path?limit=100", "/v1/stories/{story}/saves", "/v1/stories/{story}/summaries",
    "/v1/stories/{story}/scene", "/v1/stories/{story}/search?q=灯还亮着", "/v1/jobs?story_id={story}",
    "/v1/stories/{story}/recall?q=灯还亮着", "/v1/cards/{card}/lorebooks", "/v1/cards/{card}/memory",
    "/v1/stories/{story}/costs", "/v1/cards/{card}/lore/search?q=Seraphina",
)  # fmt: skip


async def answers(api: Api, made: dict[str, Any]) -> dict[str, Any]:
    paths = [p.format(card=made["card"]["id"], story=made["story"]["id"]) for p in READS]
    return {path: await api.call("GET", path) for path in paths}


async def test_a_sqlite_data_dir_copied_into_postgresql_answers_every_read_as_before(
    make_client: MakeClient, postgres_server: GivenServer | PrivateServer, store: str
) -> None:
    assert store == "sqlite"  # (the source; the destination is made here)
    source = await make_client(embedder="none", job_sweep_seconds=0.05)
    api = api_for(source, TENANT)
    made = await play(api)
    await settled(api, made["story"]["id"])
    before = await answers(api, made)
    art, _ = await api.fetch(f"/v1/cards/{made['card']['id']}/export?format=png")
    data_dir = source.app[SERVICE].settings.data_dir
    await source.close()

    url = postgres_server.new_database()
    copied = run("migrate", "--data-dir", str(data_dir), "--to", url)
    assert copied.returncode == 0, copied.stderr
    counted = re.search(
        r"copied ([\d,]+) events and (\d+) snapshots \((\d+) api_keys, (\d+) idempotency, (\d+) blobs", copied.stdout
    )
    assert counted is not None, copied.stdout
    assert int(counted[1].replace(",", "")) > 400 and int(counted[2]) >= 1  # (a story of 105 turns: snapshotted)
    assert int(counted[3]) >= 1 and int(counted[5]) >= 1  # the key, the card's art
    again = run("migrate", "--data-dir", str(data_dir), "--to", url)
    assert again.returncode != 0 and "already holds events" in again.stderr

    target = await make_client(embedder="none", database_url=url)
    moved = Api(target, api.headers["Authorization"].removeprefix("Bearer "))  # the key made on SQLite, here too
    after = await answers(moved, made)
    for path, answer in before.items():
        assert after[path] == answer, path
    exported, _ = await moved.fetch(f"/v1/cards/{made['card']['id']}/export?format=png")
    assert exported == art  # the art, from the copied blobs
    listed = run("keys", "list", env={"CHANGJI_DATABASE_URL": url})
    assert listed.returncode == 0 and "tenant=" + TENANT in listed.stdout


async def test_a_copy_cut_short_is_refused_by_serve_and_by_a_second_copy(
    make_client: MakeClient, postgres_server: GivenServer | PrivateServer, store: str
) -> None:
    source = await make_client(embedder="none")
    await api_for(source, TENANT).story()
    data_dir = source.app[SERVICE].settings.data_dir
    await source.close()
    url = postgres_server.new_database()
    assert run("migrate", "--data-dir", str(data_dir), "--to", url).returncode == 0
    with psycopg.connect(url, autocommit=True) as conn:  # as a copy that died half way leaves it
        conn.execute("insert into changji_meta (name, value) values ('copying', 'changji migrate')")
    with pytest.raises(RuntimeError, match="did not finish"):
        await make_client(database_url=url)
    again = run("migrate", "--data-dir", str(data_dir), "--to", url)
    assert again.returncode != 0 and "unfinished copy" in again.stderr
